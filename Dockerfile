# posenc as a container: a build stage that installs into a venv, a runtime stage without
# compilers that runs it as a non-root user. The base is a build argument so the image can be
# built where no registry is reachable (the tests pass an image they import themselves).
ARG BASE_IMAGE=python:3.12-slim

FROM ${BASE_IMAGE} AS build
WORKDIR /src
RUN python3 -m venv /opt/posenc
COPY pyproject.toml README.md ./
COPY posenc ./posenc
COPY app ./app
RUN /opt/posenc/bin/python -m pip install --no-cache-dir --disable-pip-version-check .
# Compile the table loops (numba) once, here: a container that compiled on its first request
# would spend ~2 s of it doing so, on every replica after every scale-out.
# From /, not /src: there ./posenc would shadow the installed package, and numba keys its cache
# by the source file's path, so the runtime (which imports the installed one) would miss it all.
ENV NUMBA_CACHE_DIR=/opt/posenc/numba-cache
WORKDIR /
RUN /opt/posenc/bin/python -c "from posenc.warm import compile_kernels; compile_kernels()"

FROM ${BASE_IMAGE}
RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin posenc
COPY --from=build /opt/posenc /opt/posenc
# The memory budget (POSENC_MEMORY_BYTES) and the cache (POSENC_CACHE_BYTES) are left to their
# defaults, derived from the container's memory limit: one number to set (--memory), and the
# budget follows it. That holds per process, so a container runs one worker: scale by replicas.
# BLAS in one thread: requests are the parallelism, and BLAS threads of their own would spend a
# container's CPU quota behind the event loop's back.
# glibc: fixed mmap threshold and two arenas, so freed NumPy buffers go back to the kernel
# (its dynamic threshold otherwise keeps them in the heap; measured after a burst of large
# tables: RSS 161 MiB without, 94 MiB with, peak 225 → 152 MiB).
# PYTHONFAULTHANDLER: a fatal signal leaves every thread's Python stack in the container's log
# from the first import on (the server enables it itself as it starts: this covers the imports
# and the app's creation before that).
ENV PATH=/opt/posenc/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONFAULTHANDLER=1 \
    MALLOC_ARENA_MAX=2 \
    MALLOC_MMAP_THRESHOLD_=131072 \
    NUMBA_CACHE_DIR=/tmp/numba-cache \
    OPENBLAS_NUM_THREADS=1 \
    OMP_NUM_THREADS=1 \
    POSENC_HOST=0.0.0.0 \
    POSENC_PORT=8000 \
    POSENC_WORKERS=1
USER 10001
WORKDIR /tmp
EXPOSE 8000
HEALTHCHECK --interval=5s --timeout=3s --start-period=5s --retries=3 \
    CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ['POSENC_PORT'] + '/healthz', timeout=2)"]
STOPSIGNAL SIGTERM
# Whatever the container runs (the server, or `posenc check …` in a port's CI), the compiled
# loops are first copied to /tmp, writable even under a read-only root filesystem (numba caches
# only where it can write): without them every `posenc` run compiled again (~3.5 s of CPU).
# exec: uvicorn is PID 1 and gets SIGTERM itself; in-flight requests get 5 s to finish.
ENTRYPOINT ["sh", "-c", "cp -r /opt/posenc/numba-cache /tmp/ 2>/dev/null; exec \"$@\"", "posenc-entrypoint"]
CMD ["sh", "-c", "exec uvicorn --factory app.main:create_app --host \"$POSENC_HOST\" --port \"$POSENC_PORT\" --workers \"$POSENC_WORKERS\" --no-server-header --no-access-log --timeout-graceful-shutdown 5"]
