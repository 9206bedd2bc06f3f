"""The Kubernetes side of the jobs app: manifests for an execution attempt, the API
client for a fleet, state sync, pod events, and the GPU watchdog. The executor itself
(launch / cancel / is_alive) is apps.jobs.executors.kubernetes."""
