"""The core hands-on (notebooks 01-03): stages 1-3's exercises, their observers and checks, and how
runs compare with the stage-1 baseline."""
