# Rollout: API + dashboard + a private local Ray head (or RAY_ADDRESS for an existing cluster).
#   docker build -t rollout .
#   docker run -p 8000:8000 --shm-size=2g -e ROLLOUT_API_TOKEN=... -v rollout-data:/data rollout
# `rollout serve` refuses a non-loopback address without ROLLOUT_API_TOKEN, so set it.

# --- the dashboard ---------------------------------------------------------------------------------
FROM node:20-bookworm-slim AS frontend
WORKDIR /src/frontend
COPY frontend/package.json frontend/package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY frontend/ ./
RUN npm run build

# --- the service -----------------------------------------------------------------------------------
FROM python:3.11-slim AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    ROLLOUT_DATA_DIR=/data \
    ROLLOUT_HOST=0.0.0.0 \
    ROLLOUT_PORT=8000
WORKDIR /srv/rollout

# EGL (Mesa) so that evaluation videos of MuJoCo envs render without a display (MUJOCO_GL=egl).
RUN apt-get update -q \
    && apt-get install -y -q --no-install-recommends libegl1 libegl-mesa0 libopengl0 \
    && rm -rf /var/lib/apt/lists/*

# torch first, from the CPU index: the default index pulls a multi-GB CUDA build.
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu

# Dependencies before the code, so code changes keep this layer cached.
COPY pyproject.toml README.md ./
RUN mkdir -p app trainer && touch app/__init__.py trainer/__init__.py \
    && pip install -e . \
    && rm -rf app trainer

# An editable install keeps the package next to migrations/ and alembic.ini (applied at start-up)
# and gives Ray jobs the project root as their working directory.
COPY alembic.ini ./
COPY migrations ./migrations
COPY trainer ./trainer
COPY app ./app
COPY --from=frontend /src/frontend/dist ./frontend/dist

# Jobs run user code. Each job runs on a Ray cluster of its own, as one of eight jobs users
# (`rollout-job-1` .. `rollout-job-8`) that no other running job has, with a Ray token of its
# own: a job can reach neither the database, the checkpoints, the service's environment nor
# another job (its processes, its files, its cluster's Jobs API); docs/operations.md,
# "Production isolation". Eight users: eight jobs (experiments and evaluations) at once. The
# service runs as root inside the container because it must start each cluster as its user;
# Docker's default capability set has no CAP_SYS_PTRACE. To run everything as one unprivileged
# user instead (one user, on their own machine), pass `--user 1000 -e ROLLOUT_JOBS_USERS=`.
RUN useradd --create-home --uid 1000 rollout \
    && for i in 1 2 3 4 5 6 7 8; do \
         useradd --system --no-create-home --uid $((980 + i)) --shell /usr/sbin/nologin \
           "rollout-job-$i"; \
       done \
    && mkdir -p /data && chown rollout /data
ENV ROLLOUT_JOBS_USERS=rollout-job-1,rollout-job-2,rollout-job-3,rollout-job-4,rollout-job-5,rollout-job-6,rollout-job-7,rollout-job-8
VOLUME /data
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health', timeout=4)"
CMD ["rollout", "serve", "--host", "0.0.0.0"]
