/**
 * Time comparable across the bench's processes: milliseconds on the machine's
 * monotonic clock (libuv's `uv_hrtime`, CLOCK_MONOTONIC on Linux), which every
 * process reads alike.
 *
 * Not `performance.timeOrigin + performance.now()`: each process fixes its
 * time origin from the wall clock when it starts, and on these VMs the wall
 * clock is slewed against the monotonic one by ≈ 5 ms per second, so two
 * processes started seconds apart disagreed by tens of milliseconds and
 * made commit → first byte latencies look worse the longer the bench ran.
 */
export const machineNowMs = (): number => Number(process.hrtime.bigint()) / 1e6;
