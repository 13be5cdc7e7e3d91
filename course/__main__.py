"""python -m course ..."""

from course.cli import main

raise SystemExit(main())
