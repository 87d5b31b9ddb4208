"""The buffer planner: views share and extend their input's buffer, in-place only where safe,
opaque outputs keep their inputs alive, requested tensors get buffers outside the arena."""

from edgecnn.runtime.buffers import StepIO, TensorInfo, plan_buffers
from edgecnn.runtime.memory import align


def info(n: int = 1024, shape: tuple[int, ...] = (256,)) -> TensorInfo:
    return TensorInfo("float32", shape, n)


def overlap(plan, a: int, b: int) -> bool:  # type: ignore[no-untyped-def]
    """Whether roots a and b share arena bytes."""
    offsets, sizes = plan.layout.offsets, {a: align(1024), b: align(1024)}
    return offsets[a] < offsets[b] + sizes[b] and offsets[b] < offsets[a] + sizes[a]


def test_a_view_shares_its_input_buffer_and_extends_its_life() -> None:
    # 0 = input; step0: 1 = f(0); step1: 2 = view(1); step2: 3 = g(0); step3: 4 = h(2, 3)
    steps = [
        StepIO((0,), (1,), "into"),
        StepIO((1,), (2,), "view"),
        StepIO((0,), (3,), "into"),
        StepIO((2, 3), (4,), "into"),
    ]
    tensors = {s: info() for s in range(5)}
    tensors[2] = info(shape=(16, 16))
    plan = plan_buffers(steps, tensors, sources=[0], pinned={4})
    assert plan.root[2] == 1
    assert plan.lifetime[1] == (0, 3)  # read through the view at step 3
    assert not overlap(plan, 1, 3)  # so step 2's output cannot take its place
    assert plan.kind[4] == "external" and 4 not in plan.layout.offsets


def test_in_place_only_when_the_input_dies_at_this_step() -> None:
    # step0: 1 = conv(0); step1: 2 = relu(1) in place; step2: 3 = relu(2) but 2 is read again later
    steps = [
        StepIO((0,), (1,), "into"),
        StepIO((1,), (2,), "into", in_place=(0,)),
        StepIO((2,), (3,), "into", in_place=(0,)),
        StepIO((2, 3), (4,), "into", in_place=(0, 1)),
    ]
    tensors = {s: info() for s in range(5)}
    plan = plan_buffers(steps, tensors, sources=[0], pinned={4})
    assert plan.in_place == {1: 0}
    assert plan.root[2] == 1 and plan.root[3] == 3
    assert plan.root[4] == 4  # a requested output never lives in the arena, even in place
    assert plan.lifetime[1] == (0, 3)


def test_no_in_place_over_inputs_or_buffers_still_read_through_a_view() -> None:
    steps = [
        StepIO((0,), (1,), "into", in_place=(0,)),  # 0 is the caller's input: never overwritten
        StepIO((1,), (2,), "view"),
        StepIO((1,), (3,), "into", in_place=(0,)),  # 1 is still read through view 2 at step 3
        StepIO((2, 3), (4,), "into", in_place=(0, 1)),  # view 2 (and so buffer 1) dies here
    ]
    tensors = {s: info() for s in range(5)}
    plan = plan_buffers(steps, tensors, sources=[0], pinned=set())
    assert plan.in_place == {3: 0}
    assert plan.root[4] == 1


def test_no_in_place_into_a_buffer_of_another_type() -> None:
    steps = [StepIO((0,), (1,), "into"), StepIO((1,), (2,), "into", in_place=(0,))]
    tensors = {0: info(), 1: info(), 2: TensorInfo("float32", (16, 16), 1024)}
    plan = plan_buffers(steps, tensors, sources=[0], pinned=set())
    assert plan.in_place == {}


def test_opaque_outputs_keep_every_input_buffer_alive() -> None:
    # an opaque step may return a view of its input: 1 must live as long as 2 is read
    steps = [
        StepIO((0,), (1,), "into"),
        StepIO((1,), (2,), "opaque"),
        StepIO((0,), (3,), "into"),
        StepIO((2, 3), (4,), "into"),
    ]
    tensors = {s: info() for s in range(5)}
    plan = plan_buffers(steps, tensors, sources=[0], pinned={4})
    assert plan.kind[2] == "opaque" and 2 not in plan.layout.offsets
    assert plan.lifetime[1] == (0, 3)
    assert not overlap(plan, 1, 3)


def test_a_chain_reuses_two_buffers_and_naive_counts_every_tensor() -> None:
    steps = [StepIO((i,), (i + 1,), "into") for i in range(8)]
    tensors = {s: info() for s in range(9)}
    plan = plan_buffers(steps, tensors, sources=[0], pinned={8})
    assert plan.arena_bytes == 2 * 1024
    assert plan.naive_bytes == 8 * 1024


def concat_steps(extra: list[StepIO] | None = None) -> list[StepIO]:
    # 1 = f(0); 2 = g(0); [extra]; 3 = concat(1, 2), the inputs slabs at bytes 0 and 1024 of 3
    return [
        StepIO((0,), (1,), "into"),
        StepIO((0,), (2,), "into"),
        *(extra or []),
        StepIO((1, 2), (3,), "into", concat_offsets=(0, 1024)),
        StepIO((3,), (4,), "into"),
    ]


def test_a_concat_of_arena_buffers_is_written_in_place_by_its_producers() -> None:
    tensors = {s: info() for s in range(5)}
    tensors[3] = info(2048, (512,))
    plan = plan_buffers(concat_steps(), tensors, sources=[0], pinned={4})
    assert plan.elided == {2}
    assert plan.root[1] == plan.root[2] == 3
    assert plan.offset == {1: 0, 2: 1024}
    assert plan.lifetime[3] == (0, 3)  # from the first producer to the last reader


def test_no_concat_elision_over_returned_or_aliased_inputs() -> None:
    tensors = {s: info() for s in range(7)}
    tensors[3] = info(2048, (512,))
    assert not plan_buffers(concat_steps(), tensors, sources=[0], pinned={4, 1}).elided
    viewed = [StepIO((1,), (5,), "view")]  # a view moves with its buffer into the output
    plan = plan_buffers(concat_steps(viewed), tensors, sources=[0], pinned={4})
    assert plan.elided == {3} and plan.root[5] == 3 and plan.offset[5] == 0
    aliased = [StepIO((2,), (6,), "opaque")]
    assert not plan_buffers(concat_steps(aliased), tensors, sources=[0], pinned={4}).elided


def split_steps(pinned_split: bool = False) -> list[StepIO]:
    # 1 = f(0); (2, 3) = split(1), slabs at bytes 0 and 1024 of 1; 4 = g(2); 5 = h(3, 4)
    return [
        StepIO((0,), (1,), "into"),
        StepIO((1,), (2, 3), "into", split_offsets=(0, 1024)),
        StepIO((2,), (4,), "into"),
        StepIO((3, 4), (5,), "into"),
    ]


def test_a_split_of_an_arena_buffer_is_read_where_it_lies() -> None:
    tensors = {s: info() for s in range(6)}
    tensors[1] = info(2048, (512,))
    plan = plan_buffers(split_steps(), tensors, sources=[0], pinned={5})
    assert plan.elided == {1}
    assert plan.root[2] == plan.root[3] == 1
    assert plan.offset == {2: 0, 3: 1024}
    assert plan.lifetime[1] == (0, 3)  # the second half is read by the last step
    assert 2 not in plan.layout.offsets and 3 not in plan.layout.offsets  # no buffers of their own


def test_no_split_view_of_a_source_or_into_a_returned_output() -> None:
    tensors = {s: info() for s in range(6)}
    tensors[1] = info(2048, (512,))
    assert not plan_buffers(split_steps(), tensors, sources=[0], pinned={5, 2}).elided
    from_source = [StepIO((0,), (2, 3), "into", split_offsets=(0, 1024)), *split_steps()[2:]]
    tensors[0] = info(2048, (512,))
    assert not plan_buffers(from_source, tensors, sources=[0], pinned={5}).elided
