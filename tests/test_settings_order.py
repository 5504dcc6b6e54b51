import os

from django.conf import settings


def test_the_run_uses_its_own_data_folder_and_queue():
    assert str(settings.DATA_DIR).endswith(f"test-{os.getpid()}")
    assert settings.CELERY_TASK_DEFAULT_QUEUE == f"gateway-test-{os.getpid()}"
