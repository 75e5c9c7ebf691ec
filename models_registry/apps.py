from django.apps import AppConfig

from jobs import catalogue


def _batch_plans(job) -> list:
    """Its serving processes, each counted as a worker replica of a 4-vCPU machine."""
    # deferred: the batch runner loads the executor, wanted only where jobs run
    from models_registry import batch

    return [
        catalogue.ReplicaPlan("worker", index, "n1-standard-4", None, 0)
        for index in range(batch.replicas_needed(job.prediction_input))
    ]


def _batch_runner() -> type:
    # deferred: as above
    from models_registry import batch

    return batch.BatchPredictionRunner


def _batch_page():
    # deferred: the pages' code is wanted only where pages are drawn
    from models_registry import page

    return page.page()


def _serving_start() -> None:
    """Resume version deployments a stopped console left unfinished; warm minNodes processes."""
    # deferred: serving runs only in the process that runs jobs
    from models_registry import deploy
    from models_registry.serving import containers, supervisor  # deferred: as above

    containers.sweep()  # serving containers an earlier console process left
    deploy.resume()
    supervisor.start()


def _serving_stop() -> None:
    # deferred: as above
    from models_registry.serving import supervisor

    supervisor.stop()


def _read_batch_prediction_job(body, **context):
    # deferred: as for the pipeline's upload
    from models_registry.vertex import batch

    return batch.read(body, **context)


def _upload_pipeline_model(job) -> None:
    # deferred: the Vertex services load the serving supervisor, wanted only once a job succeeded
    from models_registry.vertex import pipelines

    pipelines.upload_trained_model(job)


class ModelsRegistryConfig(AppConfig):
    name = "models_registry"
    verbose_name = "Model registry"

    def ready(self):
        # Batch prediction is a kind of job, and model serving runs beside the jobs (jobs.kinds).
        from jobs import kinds

        # deferred: it imports models, loaded once the apps are
        from models_registry import services

        kinds.register(
            kinds.JobKind(
                name="batch prediction",
                input_field="predictionInput",
                matches=lambda ti, pi: pi is not None,
                check=services.check_prediction_input,
                plans=_batch_plans,
                runner=_batch_runner,
                outputs=lambda job: (job.prediction_input or {}).get("outputPath"),
                page=_batch_page,
            )
        )
        kinds.register_service(kinds.BackgroundService("model serving", start=_serving_start, stop=_serving_stop))
        kinds.register_deploy_problem(services.deploy_problem)
        kinds.register_success_hook(_upload_pipeline_model)
        # Vertex AI's batch prediction jobs are read here (their model is the registry's).
        from jobs.vertex import services as vertex_jobs

        vertex_jobs.register_reader("batchPredictionJobs", _read_batch_prediction_job)
