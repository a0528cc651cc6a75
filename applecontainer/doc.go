// Package applecontainer runs agent sessions with Apple's `container` CLI
// (github.com/apple/container): each container is a lightweight Linux VM
// on Apple silicon. It implements runtime.Engine by shelling out to the
// CLI; it links nothing of Apple's.
//
// NOTHING in this package was run on a Mac. It is tested on Linux against
// a fake `container` executable (testdata/fakecontainer) that replays
// output recorded on real Macs by others where it exists (apple/container
// issues and PRs, other projects' tests: gascan, cspace, Kontena,
// container-ui, MacPorts, Homebrew), and output reconstructed from
// apple/container's source at the tags 0.12.3 to 1.2.2 where it does not;
// testdata/README.md says which is which, file by file. The behaviour of
// the VM (the socket relay, loopback under --network none) comes from
// source and from third parties' live tests, not from ours. Test on real
// hardware before relying on it.
//
// # Finding the CLI
//
// With no Options.Bin, the CLI is "container" on PATH or, when PATH does
// not have it (a login item or LaunchAgent gets a minimal PATH), where
// Apple's installer package, Homebrew and MacPorts put it, in that order:
// /usr/local/bin, /opt/homebrew/bin, /opt/local/bin. Check reports which
// one it ran in runtime.Info, and `carapace status` shows it.
//
// # Minimum version: 1.1.0
//
// The agent's only way out is the session's Unix socket, a host file
// mounted into the container. Apple's runtime does not share a socket
// through virtiofs: when a -v source is a socket, a helper on the host
// relays each connection the guest makes over vsock and connects to the
// host path. Before 1.1.0 the guest's end of that relay did not get the
// host socket's permissions, so a host socket mounted with -v could not be
// reached by the non-root agent and the agent could not reach the core
// (apple/container issue #1750, fixed by PR #1751 in 1.1.0; ironcurtain saw
// ECONNREFUSED on 1.0.0). Check refuses older versions with that reason.
// It also refuses a running API server that is not the CLI's version:
// after an upgrade the old services keep running until `container system
// stop`, and a 1.0.0 server relays the socket so that the agent cannot
// connect. Up to 1.2.2 at least (the source read) `system status` gives
// the server's whole banner,
// "container-apiserver version 1.1.0 (build: release, commit: 5973b9c)";
// from 1.4.1 (perhaps 1.3.0) the status is nested and the version is
// server.version (apple/container PR #1769). Check reads both, and refuses a server
// version it cannot read, showing it. A development build,
// "1.1.0-23-g7b94575", counts as its release. 1.2.1 or later is
// recommended: 1.2.0 started applying read-only /proc paths that only
// 1.2.1 can override, and the relay has had bug fixes since.
//
// A fresh installation starts its services and says "running", but has no
// kernel until one is set, and every `container run` fails until then:
// Check looks in the appRoot the status gives (appRoot, or paths.appRoot
// from 1.4.1) for kernels/default.kernel-<arch>, which `container system
// kernel set --recommended` installs (KernelService.swift), and refuses
// services without one, naming that command.
//
// # The socket relay stops for good after one failed connect
//
// In apple/containerization's UnixSocketRelay (0.35.0 in container 1.1.0,
// 0.40.1 in 1.2.2, and later) the relay's accept loop ends the first time
// the host socket cannot be connected to (the listener gone, the socket
// being re-bound); later connects from the guest hang instead of being
// refused (apple/containerization issue #867; fix PR #868 closed unmerged,
// PR #933 open). The core therefore never unlinks or re-binds a session's
// socket while its container lives, and stops a container whose agent has
// not reached the core within [sessions] connect_timeout.
//
// # The flags of `container run`
//
//	container run --rm --name N --label k=v... --progress none \
//	  --network none --no-dns --read-only --tmpfs /tmp --tmpfs /home/agent \
//	  --cap-drop ALL --init --user 1000:1000 --cpus 2 --memory 4096M \
//	  -v src:dst[:ro]... -e K=V... image cmd...
//
// What each one buys:
//
//   - Run stays in the foreground (no -d): only the foreground `run`
//     returns the process's exit status; `list` and `inspect` have none.
//   - --rm removes the container when its process exits; --name makes the
//     name the container's id, so Stop and List can find it; the labels
//     let a restarted core find the containers a crashed one left.
//   - --progress none keeps the image-fetch progress lines (plain text when
//     stderr is not a terminal) out of the agent's stderr.
//   - --network none leaves loopback only: no egress, no gateway, and
//     --no-dns writes no resolver configuration.
//   - --read-only: Apple's root file system is a writable clone of the
//     image unless this is given. --tmpfs /tmp and --tmpfs /home/agent are
//     the only writable places besides the mounts; Apple's --tmpfs takes a
//     path only (no size or mode) and its pages count against --memory.
//   - --cap-drop ALL: since 0.12.0 the default is Docker's capability set,
//     and before 0.12.0 processes had every capability.
//   - --init runs a reaper that forwards signals, so `container stop`
//     reaches the agent and zombies are collected.
//   - --user runs the agent as a non-root uid:gid.
//   - --cpus and --memory bound the VM. Apple's defaults are 4 CPUs and
//     1 GiB, too little for Claude Code. --cpus takes a whole number, so a
//     fractional Limits.CPUs is rounded up; --memory is sent in MiB.
//   - -v src:dst[:ro] for every mount, the socket included. Never --mount:
//     it does not take socket sources.
//
// # What Apple's engine lacks compared with Docker
//
// There is no --security-opt (so no no-new-privileges and no seccomp
// profile), no --pids-limit (Limits.Pids is ignored) and no user
// namespace option. None of these flags is passed: the boundary is the VM,
// one per container, with its own kernel.
//
// # Sockets and other mounts
//
//   - A socket must be mounted as a single file with -v. A directory that
//     contains a socket fails inside the guest (ENOTSUP from virtiofs).
//   - The source must be the real path, not one that passes through a
//     symbolic link (apple/container #357, apple/containerization #256).
//     Run resolves every source with filepath.EvalSymlinks and refuses a
//     source that does not exist: the CLI checks existence too, but later
//     and with a less helpful message.
//   - No mount source may lie inside another's: Apple silently drops the
//     outer share (apple/container #2148, recorded on 1.2.2).
//     runtime.Spec.Check refuses that for the paths as given, and Run
//     again for the resolved ones.
//   - Single files mounted from one folder must all be read-only or all
//     writable. Apple shares a file's folder once per container, with the
//     options of the first file mounted from it (apple/containerization
//     FileMount.swift), so a read-only file before a writable one makes
//     both read-only. Run refuses the mix.
//   - The guest's end of a socket is owned by root and carries the host
//     socket's mode bits, so a non-root agent can connect only if the socket
//     is writable by others: the core creates it 0666 inside a 0700
//     directory, which is what keeps other host users out. Run refuses a
//     socket that is not writable by others when the agent is not root.
//
// # Exit status
//
// Run returns the exit status of the foreground `container run`, which is
// the agent's. The CLI's own failures (an image that cannot be pulled, a
// name already taken) also exit 1, after an "Error: ..." line on stderr;
// that line is copied to the IO's Stderr like the rest.
package applecontainer
