"""Resource names in #PBS lines and qsub -l options: PBS Pro's, Torque's nodes=, and a site's
own."""

from __future__ import annotations

import pytest

from course.cluster import pbs
from course.errors import JobError


@pytest.mark.parametrize(
    "option,unknown,nearest",
    [
        ("-l selct=1:mpiprocs=2", "selct", "select"),
        ("-l select=1:mpiproc=2", "mpiproc", "mpiprocs"),
        ("-l select=1:ngpu=2", "ngpu", "ngpus"),
        ("-l walltme=00:10:00", "walltme", "walltime"),
        ("-l nodes=2:pnn=2", "pnn", "ppn"),
        ("-l ngpus=2,mem=4gb,plce=scatter", "plce", "place"),
    ],
)
def test_a_misspelt_resource_is_refused_with_the_nearest_valid_one(option, unknown, nearest):
    with pytest.raises(JobError) as caught:
        pbs.read_request(f"#!/bin/bash\n#PBS {option}\n")
    assert caught.value.message == f"#PBS {option}: unknown resource {unknown!r}"
    assert caught.value.hint.startswith(f"did you mean {nearest}?")
    with pytest.raises(JobError, match=f"^-l .*unknown resource {unknown!r}"):
        pbs.read_request("#!/bin/bash\n", option.split())


def test_a_name_far_from_any_resource_lists_them_all():
    with pytest.raises(JobError) as caught:
        pbs.read_request("#!/bin/bash\n", ["-l", "zzz=1"])
    assert caught.value.hint.startswith("PBS knows select, place, walltime")


@pytest.mark.parametrize(
    "option,shape",
    [
        ("-l select=2:ncpus=8:mpiprocs=4:ompthreads=2:mem=16gb", (2, 4, 0)),
        ("-l select=1:ngpus=2:mpiprocs=2 -l place=scatter:excl", (1, 2, 2)),
        ("-l nodes=2:ppn=3:gpus=1", (2, 3, 1)),
        ("-l nodes=1:ppn=2:bigmem", (1, 2, 0)),  # Torque's node features are free words
        ("-l ncpus=4,mem=4gb,vmem=8gb,cput=01:00:00", (1, 1, 0)),
    ],
)
def test_the_resources_real_sites_use_are_read(option, shape):
    request = pbs.read_request("#!/bin/bash\n", option.split())
    assert (request.nodes, request.mpiprocs, request.ngpus) == shape


def test_a_sites_own_resources_are_allowed_where_its_profile_names_them():
    script = "#!/bin/bash\n#PBS -l select=1:mpiprocs=2:lscratch=10gb\n#PBS -l f_node=1\n"
    with pytest.raises(JobError, match="unknown resource 'lscratch'"):
        pbs.read_request(script)
    assert pbs.read_request(script, extra=["lscratch", "f_node"]).ranks == 2
