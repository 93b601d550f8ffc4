# syntax=docker/dockerfile:1
# Build: a Swift 6.3 image compiles a release binary with the Swift runtime linked statically.
FROM swift:6.3-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends libssl-dev zlib1g-dev libsqlite3-dev pkg-config && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
COPY Sources ./Sources
COPY Tests ./Tests
COPY config ./config
RUN swift build -c release --static-swift-stdlib \
    && install -D -m 0755 .build/release/phone-auth-emulator /out/phone-auth-emulator \
    && install -D -m 0755 .build/release/phone-auth /out/phone-auth \
    && strip /out/phone-auth-emulator /out/phone-auth

# Runtime: slim Debian with only the system libraries the binaries link (OpenSSL 3, zlib, libstdc++).
# Expected size: about 100 MB (debian:bookworm-slim ~75 MB, libssl3 ~7 MB, the two stripped binaries ~17 MB).
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends libssl3 zlib1g libsqlite3-0 libstdc++6 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home /nonexistent --shell /usr/sbin/nologin emulator
COPY --from=build /out/ /usr/local/bin/
COPY config/emulator.json /etc/phone-auth-emulator/emulator.json
USER emulator
EXPOSE 9099
# Inside the container the emulator must listen on all interfaces; mount your own config at /config/emulator.json.
ENV PHONE_AUTH_EMULATOR_HOST=0.0.0.0 PHONE_AUTH_EMULATOR_PORT=9099
HEALTHCHECK --interval=5s --timeout=3s --start-period=2s --retries=3 CMD ["phone-auth", "health", "--emulator", "http://127.0.0.1:9099"]
ENTRYPOINT ["/bin/sh", "-c", "if [ -f /config/emulator.json ]; then exec phone-auth-emulator --config /config/emulator.json \"$@\"; else exec phone-auth-emulator --config /etc/phone-auth-emulator/emulator.json \"$@\"; fi", "--"]
