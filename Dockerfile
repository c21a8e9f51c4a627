# Production-like image for the web server and the Celery workers.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 STATIC_ROOT=/app/static
WORKDIR /app
# WordNet 3.0 for the pos and synset relevance proxies (docs/relevance.md): never downloaded.
RUN apt-get update && apt-get install -y --no-install-recommends wordnet-base \
    && rm -rf /var/lib/apt/lists/*

COPY pyproject.toml README.md ./
COPY config ./config
COPY annotation ./annotation
COPY mitl ./mitl
COPY pipeline ./pipeline
COPY api ./api
COPY frontend ./frontend
COPY manage.py ./
RUN pip install --no-cache-dir .
# Static files are collected into the image; WhiteNoise serves them under gunicorn.
RUN DEBUG=1 python manage.py collectstatic --noinput -v0

RUN useradd --create-home mitl && mkdir -p /app/var && chown mitl /app/var
USER mitl
EXPOSE 8000
CMD ["gunicorn", "config.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3"]
