# The pod sandbox image (pause.c, built static).
FROM scratch
COPY pause /pause
USER 65535:65535
ENTRYPOINT ["/pause"]
