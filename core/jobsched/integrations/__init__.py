"""jobsched inside other frameworks' applications (docs/integrations.md).

Each integration is a module of its own, importing its framework only when
it is imported: ``jobsched.integrations.starlette`` (Starlette and FastAPI),
``jobsched.integrations.django`` (submitting when a transaction commits).
"""
