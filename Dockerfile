# syntax=docker/dockerfile:1
#
# docker build -t phone-auth-emulator .     compiles the binaries in the Swift stage and assembles the runtime image.
#
# Two build arguments change where the parts come from (scripts/image-check and .github/workflows/release.yml):
#   BINARIES=prebuilt      take the binaries from the build context, prebuilt/<TARGETARCH>/{phone-auth-emulator,phone-auth}
#                          (release binaries built outside, e.g. natively per architecture), instead of the Swift stage;
#   RUNTIME_BASE=IMAGE     the Debian bookworm image the runtime root is assembled from (default debian:bookworm-slim;
#                          scripts/image-check uses a debootstrap'd bookworm imported with `podman import`).
# The runtime image itself is FROM scratch: the binaries, the shared libraries `ldd` says they load, a passwd entry.
ARG RUNTIME_BASE=debian:bookworm-slim
ARG BINARIES=build

# Build: a Swift 6.3 image compiles the release binaries with the Swift runtime linked statically.
FROM swift:6.3-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends libssl-dev zlib1g-dev libsqlite3-dev pkg-config && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Package.swift ./
COPY Sources ./Sources
COPY Tests ./Tests
COPY config ./config
RUN swift build -c release --static-swift-stdlib \
    && install -D -m 0755 .build/release/phone-auth-emulator /out/phone-auth-emulator \
    && install -D -m 0755 .build/release/phone-auth /out/phone-auth

# Or: binaries built outside, one folder per architecture in the build context.
FROM scratch AS prebuilt
ARG TARGETARCH
COPY prebuilt/${TARGETARCH}/phone-auth-emulator prebuilt/${TARGETARCH}/phone-auth /out/

FROM ${BINARIES} AS binaries

# The runtime root, assembled in /rootfs of a bookworm image that has the libraries the binaries link.
FROM ${RUNTIME_BASE} AS rootfs
RUN apt-get update && apt-get install -y --no-install-recommends libssl3 libsqlite3-0 libstdc++6 binutils \
    && rm -rf /var/lib/apt/lists/*
COPY --from=binaries /out/ /rootfs/usr/local/bin/
RUN set -eu; \
    # (Binaries that travelled as CI artifacts lost their mode bits.)
    chmod 0755 /rootfs/usr/local/bin/phone-auth-emulator /rootfs/usr/local/bin/phone-auth; \
    strip /rootfs/usr/local/bin/phone-auth-emulator /rootfs/usr/local/bin/phone-auth; \
    # Every library either binary loads, at the path the loader looks for it (ldd: "name => /path (addr)" or "/path (addr)").
    libs=$(for b in /rootfs/usr/local/bin/*; do ldd "$b"; done | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u); \
    [ -n "$libs" ]; \
    for lib in $libs; do mkdir -p "/rootfs${lib%/*}"; cp -L "$lib" "/rootfs$lib"; done; \
    # Their Debian copyright files, as the packages ship them.
    for lib in $libs; do dpkg -S "$(readlink -f "$lib")" 2>/dev/null || dpkg -S "$lib"; done | cut -d: -f1 | sort -u \
      | while read -r pkg; do install -D -m 0644 "/usr/share/doc/$pkg/copyright" "/rootfs/usr/share/doc/$pkg/copyright"; done; \
    # A non-root user, a writable /data for --data-dir and exports (mount a volume there), /tmp.
    mkdir -p /rootfs/etc /rootfs/data /rootfs/tmp /rootfs/config; \
    printf 'root:x:0:0:root:/nonexistent:/sbin/nologin\nemulator:x:10001:10001:phone-auth-emulator:/nonexistent:/sbin/nologin\n' > /rootfs/etc/passwd; \
    printf 'root:x:0:\nemulator:x:10001:\n' > /rootfs/etc/group; \
    chown 10001:10001 /rootfs/data; chmod 1777 /rootfs/tmp; \
    # Every library must resolve inside this root (a missing one fails the build here, not at run time): the
    # binary's own loader, in the root, lists them (running the programs needs /proc, which a build step lacks).
    for b in phone-auth-emulator phone-auth; do \
      loader=$(readelf -l "/rootfs/usr/local/bin/$b" | sed -n 's/.*program interpreter: \(.*\)]$/\1/p'); \
      if ! chroot /rootfs "$loader" --list "/usr/local/bin/$b" || chroot /rootfs "$loader" --list "/usr/local/bin/$b" | grep -q 'not found'; then \
        echo "$b: a library is missing from the runtime root" >&2; exit 1; \
      fi; \
    done

# Runtime: nothing but the root assembled above (no shell, no package manager).
FROM scratch AS runtime
COPY --from=rootfs /rootfs/ /
USER 10001:10001
# The working directory's config/emulator.json is the config file: mount yours at /config/emulator.json; without it
# the embedded default (the repository's config/emulator.json) applies.
WORKDIR /
EXPOSE 9099
# Inside the container the emulator must listen on all interfaces; POST …:export writes below /data.
ENV PHONE_AUTH_EMULATOR_HOST=0.0.0.0 PHONE_AUTH_EMULATOR_PORT=9099 PHONE_AUTH_EMULATOR_EXPORT_ROOT=/data
HEALTHCHECK --interval=5s --timeout=3s --start-period=2s --retries=3 CMD ["/usr/local/bin/phone-auth", "health", "--emulator", "http://127.0.0.1:9099"]
ENTRYPOINT ["/usr/local/bin/phone-auth-emulator"]
