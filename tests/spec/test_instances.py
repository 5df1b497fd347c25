"""The instance table's vCPU figure is the one every rule and the CPU scaling target use."""
from deployment_spec.facts import instances


def test_vcpus_come_from_the_table_where_it_has_the_type():
    # ml.t2.medium has 2 vCPUs (a size-based guess would say 1, and halve a CPU scaling target).
    assert instances.vcpus("ml.t2.medium") == 2
    assert instances.vcpus("ml.c5.xlarge") == 4
    assert instances.vcpus("ml.g5.12xlarge") == 48
    assert instances.vcpus("ml.p4d.24xlarge") == 96


def test_vcpus_of_a_type_the_table_lacks_follow_its_size():
    assert instances.vcpus_memory_gib("ml.x9.2xlarge") is None
    assert instances.vcpus("ml.x9.2xlarge") == 8
    assert instances.vcpus("ml.x9.large") == 2
