package agent

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeClaude stands in for Claude Code: it records its arguments and
// whether it saw the done token, prints an answer, and exits 3 — or,
// with WAIT set, waits for SIGTERM and exits 143 when it comes.
const fakeClaude = `#!/bin/sh
echo "args: $*"
echo "token seen: ${CARAPACE_DONE-none}"
echo "prompt file: ${CARAPACE_PROMPT_FILE-none}"
if [ -n "${WAIT-}" ]; then
	trap 'echo got TERM >"$WAIT"; exit 143' TERM
	echo started >"$WAIT.started"
	while :; do sleep 0.01; done
fi
printf 'the answer, without a newline at the end'
exit 3
`

// runEntrypoint starts the image's entrypoint with /bin/sh (the image's
// shell is Debian's too) and a fake claude first on PATH, with env added.
func runEntrypoint(t *testing.T, env ...string) (*exec.Cmd, *bytes.Buffer, string) {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string]string{"carapace-agent": string(Entrypoint), "bin/claude": fakeClaude, "prompt": "what is on today?"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("/bin/sh", filepath.Join(dir, "carapace-agent"))
	cmd.Env = append([]string{"PATH=" + filepath.Join(dir, "bin") + ":/usr/bin:/bin", "HOME=" + dir,
		"CARAPACE_PROMPT_FILE=" + filepath.Join(dir, "prompt")}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out, dir
}

func exitStatus(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("the entrypoint did not exit with a status: %v", err)
	}
	return ee.ExitCode()
}

// With a token, the entrypoint prints the done line last, with Claude
// Code's status, after all of its output; Claude Code never sees the
// token (and does see the prompt file: the control). Without one it
// execs Claude Code and prints no line.
func TestEntrypointSaysDone(t *testing.T) {
	for _, tc := range []struct {
		name, token, want string
	}{
		{"token", "CARAPACE_DONE=0123abcd", "the answer, without a newline at the end\ncarapace-agent-done 0123abcd 3\n"},
		{"no token", "", "the answer, without a newline at the end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, out, dir := runEntrypoint(t, tc.token)
			if got := exitStatus(t, cmd.Wait()); got != 3 {
				t.Fatalf("exit %d, want Claude Code's 3; output:\n%s", got, out)
			}
			s := out.String()
			if !strings.HasSuffix(s, tc.want) {
				t.Fatalf("output ends %q, want %q", s[max(0, len(s)-len(tc.want)-20):], tc.want)
			}
			if strings.Count(s, "carapace-agent-done") > 1 {
				t.Fatalf("more than one done line:\n%s", s)
			}
			for _, w := range []string{"args: -p --setting-sources user what is on today?\n", "token seen: none\n", "prompt file: " + filepath.Join(dir, "prompt") + "\n"} {
				if !strings.Contains(s, w) {
					t.Errorf("Claude Code's output lacks %q:\n%s", w, s)
				}
			}
		})
	}
}

// docker stop's SIGTERM reaches Claude Code through the entrypoint, which
// then exits with its status and prints no done line: the session ends
// with the stop's cause, not as an answer.
func TestEntrypointPassesSIGTERMOn(t *testing.T) {
	wait := filepath.Join(t.TempDir(), "wait")
	cmd, out, _ := runEntrypoint(t, "CARAPACE_DONE=0123abcd", "WAIT="+wait)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(wait + ".started"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the fake Claude Code did not start:\n%s", out)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := exitStatus(t, cmd.Wait()); got != 143 {
		t.Fatalf("exit %d, want Claude Code's 143; output:\n%s", got, out)
	}
	if b, err := os.ReadFile(wait); err != nil || string(b) != "got TERM\n" {
		t.Fatalf("Claude Code was not sent SIGTERM (%q, %v)", b, err)
	}
	if strings.Contains(out.String(), "carapace-agent-done") {
		t.Fatalf("a stopped agent's entrypoint printed the done line:\n%s", out)
	}
}
