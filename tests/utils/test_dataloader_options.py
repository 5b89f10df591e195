"""DataLoader argument handling and multi-process ownership (audit round 10)."""

import multiprocessing

import pytest

from ember.utils.data import DataLoader

fork_only = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                               reason="needs the fork start method")


def test_shuffle_accepts_any_truthy_value_like_torch():
    loader = DataLoader(list(range(4)), shuffle=1)
    assert type(loader.sampler).__name__ == "RandomSampler"
    loader = DataLoader(list(range(4)), shuffle=0)
    assert type(loader.sampler).__name__ == "SequentialSampler"


def test_multiprocessing_context_of_the_wrong_type_raises_typeerror():
    with pytest.raises(TypeError, match="should be a valid context object or a string"):
        DataLoader(list(range(4)), num_workers=1, multiprocessing_context=3)


def _drop_the_only_reference(holder):
    holder.clear()          # runs the inherited iterator's __del__ in the child


@fork_only
def test_a_forked_process_dropping_an_inherited_iterator_leaves_its_workers_alone():
    holder = [iter(DataLoader(list(range(8)), batch_size=1, num_workers=2))]
    assert next(holder[0]).tolist() == [0]
    child = multiprocessing.get_context("fork").Process(target=_drop_the_only_reference,
                                                        args=(holder,))
    child.start()
    child.join(5)
    assert child.exitcode == 0
    assert [batch.tolist() for batch in holder[0]] == [[i] for i in range(1, 8)]
