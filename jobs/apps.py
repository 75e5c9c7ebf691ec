from django.apps import AppConfig
from django.conf import settings


def _training_plans(job) -> list:
    """A training job's replicas; a tuning job holds a set per parallel trial, capped at what fits."""
    # deferred: the catalogue reads settings, and this module loads before they are ready
    from jobs import catalogue
    from jobs.tuning import limits as tuning

    per_trial = catalogue.replica_plan(job.training_input)
    spec = job.training_input.get("hyperparameters")
    if not spec:
        return per_trial
    return per_trial * tuning.parallel_trials(spec, len(per_trial), settings.MAX_REPLICAS)


def _job_runner() -> type:
    # deferred: the executor loads only in the process that runs jobs
    from jobs.executor.runner import JobRunner

    return JobRunner


def _training_page():
    # deferred: the pages' code is wanted only where pages are drawn
    from jobs.training import page

    return page.page()


def _tuning_page():
    # deferred: as above
    from jobs.tuning import page

    return page.page()


def _builtin_page():
    # deferred: as above
    from jobs.builtin import page

    return page.page()


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Training jobs"

    def ready(self):
        # The training kinds (jobs.kinds); batch prediction is registered by models_registry.
        # deferred: they import models, loaded once the apps are
        from jobs import kinds, services
        from jobs.builtin import algorithm as builtin
        from jobs.containers import images as container_images

        # Each feature's own submission rules, on top of the one validator and submit check.
        kinds.register_training_rule(builtin.check_training_input)
        kinds.register_submission_check(builtin.check_submission)
        kinds.register_submission_check(container_images.check_submission)

        def training(name: str, matches, page, **more) -> kinds.JobKind:
            return kinds.JobKind(
                name=name,
                matches=matches,
                check=services.check_training_input,
                plans=_training_plans,
                runner=_job_runner,
                page=page,
                **more,
            )

        kinds.register(
            training(
                "built-in algorithm",
                lambda ti, pi: ti is not None and builtin.is_builtin_input(ti),
                _builtin_page,
                training_output=builtin.training_output,
            )
        )
        kinds.register(
            training("tuning", lambda ti, pi: ti is not None and bool(ti.get("hyperparameters")), _tuning_page)
        )
        kinds.register(training("training", lambda ti, pi: ti is not None, _training_page))
