# The gateway's image: every process is `python manage.py serve --role ROLE` (docs/operations.md;
# compose.yaml runs one role per service). One-off commands go through the same entrypoint:
# `docker compose run --rm web1 migrate`, `... createsuperuser`.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    GATEWAY_DATA_DIR=/data \
    STATIC_ROOT=/app/staticfiles

WORKDIR /app
# The dependencies first: a change of code alone does not reinstall them. The source runs from
# /app as it is (manage.py), so the project itself is not installed.
COPY pyproject.toml ./
RUN python -c 'import subprocess, sys, tomllib; \
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]; \
subprocess.check_call([sys.executable, "-m", "pip", "install", "--no-cache-dir", \
"--disable-pip-version-check", *deps])'
COPY . .

# Non-root; the data folder (the secret key if none is given) is the user's.
RUN useradd --system --uid 10001 --home-dir /app gateway \
    && mkdir -p /data /app/staticfiles \
    # The static files collected once, at build time, into the image (whitenoise serves them).
    && SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput -v0 \
    && chown -R gateway /data
USER gateway
VOLUME ["/data"]
EXPOSE 8000

ENTRYPOINT ["python", "manage.py"]
CMD ["serve", "--role", "all", "--host", "0.0.0.0", "--port", "8000"]
