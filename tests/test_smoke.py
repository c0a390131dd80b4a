import asyncio

from jobsched import JobScheduler, JobStatus


async def test_function_jobs_run_to_completion() -> None:
    scheduler = JobScheduler(num_workers=2)

    async def double(x: int) -> int:
        await asyncio.sleep(0)
        return 2 * x

    def inc(x: int) -> int:
        return x + 1

    a = scheduler.submit(double, 21)
    b = scheduler.submit(inc, 1)
    async with scheduler:
        await scheduler.join()
    assert scheduler.get(a).status is JobStatus.COMPLETED
    assert scheduler.get(a).result == 42
    assert scheduler.get(b).result == 2


async def test_listener_cancelling_on_running_transition_stops_the_attempt() -> None:
    scheduler = JobScheduler(num_workers=1)
    ran: list[int] = []

    async def work() -> None:
        ran.append(1)

    job_id = scheduler.submit(work)

    def cancel_on_start(job: object, old: JobStatus, new: JobStatus) -> None:
        if new is JobStatus.RUNNING:
            scheduler.cancel(job_id)

    scheduler.add_listener(cancel_on_start)
    async with scheduler:
        await scheduler.join()
    assert scheduler.get(job_id).status is JobStatus.CANCELLED
    assert ran == []
    assert scheduler.kernel.running == 0
