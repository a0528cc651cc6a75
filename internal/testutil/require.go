package testutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// CIVar is the environment variable the project's own CI sets (.ci/run
// exports CARAPACE_CI=1). Under it every tool a test needs is installed,
// and a test that finds one missing fails instead of skipping: a green
// run there means every test ran. It is not CI, which GitHub Actions and
// most other services set in every job, also on machines that lack the
// tools (the macOS workflow has no container engine).
const CIVar = "CARAPACE_CI"

// ProjectCI reports whether the tests run in the project's own CI
// (CARAPACE_CI=1), where nothing may be skipped for lack of a tool.
func ProjectCI() bool { return os.Getenv(CIVar) == "1" }

// Require returns the path of tool, looked up on PATH. When it is not
// there the test fails under the project's CI and is skipped elsewhere;
// either way the message says what needs the tool (why) and how to get it.
func Require(t testing.TB, tool, why string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		Missing(t, fmt.Sprintf("%s is not installed (%v); %s", tool, err, why))
	}
	return p
}

// RequireFile is Require for a file at a fixed path, such as the static
// busybox of Debian's busybox-static that the test image is built with.
func RequireFile(t testing.TB, path, why string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Missing(t, fmt.Sprintf("%v; %s", err, why))
	}
}

// Missing fails the test under the project's CI and skips it elsewhere,
// with reason: the rule for a tool, an engine or a file the test cannot
// run without.
func Missing(t testing.TB, reason string) {
	t.Helper()
	if ProjectCI() {
		t.Fatalf("%s (%s=1: the project's CI installs it, and nothing is skipped there)", reason, CIVar)
	}
	t.Skipf("skipped: %s", reason)
}

// MissingMain is Missing for a whole test binary, from TestMain, for
// packages whose every end-to-end test needs what is missing: it prints
// the reason and returns the exit status, 1 (fail) under the project's CI
// and 0 elsewhere, where the package's tests do not run.
func MissingMain(reason string) int {
	if ProjectCI() {
		fmt.Fprintf(os.Stderr, "FAIL: %s (%s=1: the project's CI installs it, and nothing is skipped there)\n", reason, CIVar)
		return 1
	}
	fmt.Fprintf(os.Stderr, "SKIP: every test of this package: %s\n", reason)
	return 0
}

// dockerProbe asks the Docker engine for its version, once per test
// binary. It is a probe, not the engine's check (core/runtime/docker's
// Check, which this package cannot import: that package's own tests
// import this one).
var dockerProbe = sync.OnceValue(func() error {
	bin, err := exec.LookPath("docker")
	if err != nil {
		return fmt.Errorf("the docker CLI is not installed: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "version", "--format", "{{.Server.Version}}").CombinedOutput()
	if err != nil {
		return fmt.Errorf("docker version: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
})

// DockerError is nil when the Docker engine answers `docker version`, and
// otherwise says why not. It asks the engine once per test binary.
func DockerError() error { return dockerProbe() }

// RequireDocker fails the test under the project's CI and skips it
// elsewhere when the Docker engine does not answer: the CLI alone is not
// enough (DOCKER_HOST may point nowhere, a Mac may have the CLI and no
// engine). why says what the test does with it.
func RequireDocker(t testing.TB, why string) {
	t.Helper()
	if err := DockerError(); err != nil {
		Missing(t, fmt.Sprintf("the Docker engine does not answer (%v); %s", err, why))
	}
}
