package desktop

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/carapace-dev/carapace/internal/testutil"
)

// busConfig is the private bus's configuration: a session bus listening
// on a socket in a directory of the test's, EXTERNAL authentication (the
// peer's uid, checked by the kernel), and no <servicedir> — nothing can be
// started by a call to a name nobody owns. The default policy allows what
// a session bus allows (send, receive, own), eavesdropping excepted.
const busConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
    <allow own="*"/>
  </policy>
</busconfig>
`

// StartBus starts a private D-Bus session bus (dbus-daemon --nofork with
// the configuration above) for the test and returns its address, for
// DBUS_SESSION_BUS_ADDRESS or notify.Options.BusAddress. The daemon is
// killed when the test ends; its own messages (a policy rejecting a
// message, for one) are logged if the test failed.
//
// A missing dbus-daemon fails the test, with the package that provides it.
func StartBus(t testing.TB) string {
	t.Helper()
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		t.Fatalf("desktop: the desktop tests need dbus-daemon, which is not installed: install it (Debian and Ubuntu: apt-get install dbus-daemon; .ci/run does) (%v)", err)
	}
	// Not t.TempDir: a socket's path has at most 107 bytes, and a test's
	// temporary directory is named after the test.
	dir, err := os.MkdirTemp("", "carapace-bus-")
	if err != nil {
		t.Fatalf("desktop: a directory for the bus socket: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	var escaped bytes.Buffer
	_ = xml.EscapeText(&escaped, []byte(dir))
	config := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(config, fmt.Appendf(nil, busConfig, escaped.String()), 0o600); err != nil {
		t.Fatalf("desktop: write the bus configuration: %v", err)
	}

	cmd := exec.Command(daemon, "--config-file="+config, "--nofork", "--print-address")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("desktop: %v", err)
	}
	stderr := new(testutil.Buffer)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("desktop: start dbus-daemon: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // closes stdout, ending its reader below
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("dbus-daemon said:\n%s", stderr)
		}
	})

	addrCh := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		addrCh <- strings.TrimSpace(line)
		_, _ = r.WriteTo(io.Discard)
	}()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	select {
	case addr := <-addrCh:
		if !strings.HasPrefix(addr, "unix:") {
			t.Fatalf("desktop: dbus-daemon printed no address (%q); it said:\n%s", addr, stderr)
		}
		return addr
	case <-timer.C:
		t.Fatalf("desktop: dbus-daemon printed no address within %s; it said:\n%s", Timeout, stderr)
	}
	return ""
}
