from django.apps import AppConfig
from django.conf import settings
from django.db.models.signals import post_delete


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


def _notify_start() -> None:
    # deferred: the watcher imports models, loaded once the apps are
    from jobs.notifications import watch

    watch.start()


def _notify_stop() -> None:
    # deferred: as above
    from jobs.notifications import watch

    watch.stop()


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Training jobs"

    def ready(self):
        # The training kinds (jobs.kinds); batch prediction is registered by models_registry.
        # deferred: they import models, loaded once the apps are
        from jobs import kinds, services
        from jobs.builtin import algorithm as builtin
        from jobs.containers import images as container_images
        from jobs.models import Job
        from jobs.webaccess import sessions as web_access

        # Each feature's own submission rules, on top of the one validator and submit check.
        kinds.register_training_rule(builtin.check_training_input)
        kinds.register_submission_check(builtin.check_submission)
        kinds.register_submission_check(container_images.check_submission)
        kinds.register_output_addition(web_access.add_web_access_uris)
        post_delete.connect(web_access.job_deleted, sender=Job, dispatch_uid="web-access-recordings")

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
        # Word when jobs end, wait, or a study improves: watched from the web process (jobs.notifications).
        kinds.register_service(kinds.BackgroundService("notifications", start=_notify_start, stop=_notify_stop))
