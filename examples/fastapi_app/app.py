"""The example web app: POST /signups enqueues a task, GET /jobs/{id} reads its result.

``uvicorn fastapi_app.app:app`` (from ``examples/``) with ``JOBSCHED_STORE``
set to a shared store (``postgresql://...`` or ``sqlite:////abs/jobs.db``)
hands jobs to ``jobsched worker --store "$JOBSCHED_STORE" --import
fastapi_app.tasks`` processes; without it the app runs its own in-process
scheduler on the memory store.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Response
from pydantic import BaseModel

import jobsched
from fastapi_app.tasks import send_welcome
from jobsched.integrations.starlette import JobschedClient, client, lifespan

#: A handler parameter of this type gets the client the lifespan opened.
Jobs = Annotated[JobschedClient, Depends(client)]


class Signup(BaseModel):
    email: str
    name: str = "there"


def create_app(store: str | None = None) -> FastAPI:
    """The app, on the shared store `store`, or on an in-process scheduler without one."""
    # A fresh scheduler each time the app starts: the class is a function making one.
    jobs_lifespan = lifespan(store) if store else lifespan(scheduler=jobsched.JobScheduler)
    app = FastAPI(title="signups", lifespan=jobs_lifespan)

    @app.post("/signups", status_code=202)
    async def sign_up(signup: Signup, jobs: Jobs) -> dict[str, str]:
        job_id = await jobs.submit(send_welcome.job(signup.email, signup.name))
        return {"job_id": job_id}

    @app.get("/jobs/{job_id}")
    async def job_result(
        job_id: str,
        jobs: Jobs,
        response: Response,
        wait: Annotated[float, Query(ge=0, le=60)] = 0,
    ) -> dict[str, Any]:
        """The job's result; `wait` seconds for it to finish (202 if it has not)."""
        try:
            result = await jobs.result(job_id, timeout=wait)
        except jobsched.UnknownJobError:
            raise HTTPException(404, f"no job {job_id}") from None
        except TimeoutError:
            response.status_code = 202
            return {"status": "pending"}
        except jobsched.JobFailedError as failed:
            return {"status": failed.status, "error": f"{failed.error_type}: {failed.message}"}
        return {"status": "completed", "result": result}

    return app


app = create_app(os.environ.get("JOBSCHED_STORE"))
