package testutil_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/internal/testutil"
)

// childEnv names the helper test TestRequireChild runs, in a child
// process of TestRequire: a skip or a failure ends a test, so each case
// is a test binary of its own.
const childEnv = "TESTUTIL_REQUIRE_CHILD"

// TestRequireChild is not a test of its own: TestRequire runs it in a
// child process to see what the helper does to a test.
func TestRequireChild(t *testing.T) {
	switch os.Getenv(childEnv) {
	case "":
		t.Skip("run by TestRequire")
	case "tool":
		testutil.Require(t, "carapace-no-such-tool", "the test needs it to prove a point")
	case "present":
		if p := testutil.Require(t, "go", "the test builds with it"); p == "" {
			t.Fatal("Require returned no path for go")
		}
	case "docker":
		testutil.RequireDocker(t, "the test runs a container")
	}
	t.Log("the test ran on")
}

// Under CARAPACE_CI=1 a missing tool fails the test; elsewhere (CI=true
// of other services included) it skips it with the reason. A tool that is
// there lets the test run, in both.
func TestRequire(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, child string
		env         []string
		want        string // the verdict line: "--- PASS", "--- SKIP", "--- FAIL"
		say         string // what the output must say
	}{
		{"missing, elsewhere", "tool", nil, "--- SKIP", "skipped: carapace-no-such-tool is not installed"},
		{"missing, GitHub's CI=true", "tool", []string{"CI=true"}, "--- SKIP", "the test needs it to prove a point"},
		{"missing, the project's CI", "tool", []string{"CARAPACE_CI=1"}, "--- FAIL", "the project's CI installs it"},
		{"present, the project's CI", "present", []string{"CARAPACE_CI=1"}, "--- PASS", "the test ran on"},
		{"no engine, elsewhere", "docker", []string{"DOCKER_HOST=unix:///nonexistent"}, "--- SKIP", "the Docker engine does not answer"},
		{"no engine, the project's CI", "docker", []string{"DOCKER_HOST=unix:///nonexistent", "CARAPACE_CI=1"}, "--- FAIL", "the test runs a container"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(exe, "-test.run", "^TestRequireChild$", "-test.v")
			cmd.Env = append(withoutCI(os.Environ()), childEnv+"="+tt.child)
			cmd.Env = append(cmd.Env, tt.env...)
			out, _ := cmd.CombinedOutput()
			if !strings.Contains(string(out), tt.want+": TestRequireChild") || !strings.Contains(string(out), tt.say) {
				t.Errorf("want %q saying %q:\n%s", tt.want, tt.say, out)
			}
		})
	}
	// The positive control of the engine cases: where Docker answers, the
	// same child runs.
	t.Run("engine, the project's CI", func(t *testing.T) {
		testutil.RequireDocker(t, "the control needs a real engine")
		cmd := exec.Command(exe, "-test.run", "^TestRequireChild$", "-test.v")
		cmd.Env = append(withoutCI(os.Environ()), childEnv+"=docker", "CARAPACE_CI=1")
		out, _ := cmd.CombinedOutput()
		if !strings.Contains(string(out), "--- PASS: TestRequireChild") {
			t.Errorf("with a running engine the test did not run:\n%s", out)
		}
	})
}

// withoutCI is env without the CI variables of the parent, so that each
// case sets its own.
func withoutCI(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "CI=") && !strings.HasPrefix(kv, testutil.CIVar+"=") && !strings.HasPrefix(kv, childEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}

func TestMissingMain(t *testing.T) {
	t.Setenv(testutil.CIVar, "")
	if code := testutil.MissingMain("no engine here"); code != 0 {
		t.Errorf("outside the project's CI: exit %d, want 0", code)
	}
	t.Setenv(testutil.CIVar, "1")
	if code := testutil.MissingMain("no engine here"); code != 1 {
		t.Errorf("in the project's CI: exit %d, want 1", code)
	}
}
