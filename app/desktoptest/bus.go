package desktoptest

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
// started by a call to a name nobody owns — unless the test lists
// services (StartBusWith), and then only those. The default policy allows
// what a session bus allows (send, receive, own), eavesdropping excepted.
const busConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir=%s</listen>
  <auth>EXTERNAL</auth>%s
  <policy context="default">
    <allow send_destination="*"/>
    <allow receive_sender="*"/>
    <allow own="*"/>
  </policy>
</busconfig>
`

// StartBus starts a private D-Bus session bus (dbus-daemon --nofork with
// the configuration above) for the test and returns its address, for
// DBUS_SESSION_BUS_ADDRESS or notify.Options.BusAddress. Nothing can be
// activated on it. The daemon is killed when the test ends; its own
// messages (a policy rejecting a message, for one) and those of the
// services it started are logged if the test failed.
//
// A missing dbus-daemon fails the test, with the package that provides it.
func StartBus(t testing.TB) string {
	t.Helper()
	return StartBusWith(t, BusOptions{})
}

// BusOptions configures StartBusWith.
type BusOptions struct {
	// Services maps a bus name to the command (absolute path first) the
	// bus runs when someone calls that name while nobody owns it, as
	// D-Bus activation does on a desktop (xfce4-notifyd is started that
	// way, for one). The command gets the bus's address in
	// DBUS_STARTER_ADDRESS and DBUS_SESSION_BUS_ADDRESS, and runs until
	// it exits by itself: it should exit when its connection ends, as
	// the bus is killed at the test's end.
	Services map[string][]string
}

// StartBusWith is StartBus with options: the same private bus, on which
// the listed services, and only those, can be activated.
func StartBusWith(t testing.TB, opts BusOptions) string {
	t.Helper()
	daemon := testutil.Require(t, "dbus-daemon", "the desktop tests run a private session bus (Debian and Ubuntu: apt-get install dbus-daemon)")
	// Not t.TempDir: a socket's path has at most 107 bytes, and a test's
	// temporary directory is named after the test.
	dir, err := os.MkdirTemp("", "carapace-bus-")
	if err != nil {
		t.Fatalf("desktop: a directory for the bus socket: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	var serviceDir string
	if len(opts.Services) > 0 {
		services := filepath.Join(dir, "services")
		if err := os.Mkdir(services, 0o700); err != nil {
			t.Fatalf("desktop: a directory for the bus's services: %v", err)
		}
		for name, argv := range opts.Services {
			file := fmt.Sprintf("[D-BUS Service]\nName=%s\nExec=%s\n", name, serviceExec(t, argv))
			if err := os.WriteFile(filepath.Join(services, name+".service"), []byte(file), 0o600); err != nil {
				t.Fatalf("desktop: write the service file of %s: %v", name, err)
			}
		}
		serviceDir = "\n  <servicedir>" + xmlText(services) + "</servicedir>"
	}
	config := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(config, fmt.Appendf(nil, busConfig, xmlText(dir), serviceDir), 0o600); err != nil {
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

// xmlText escapes s for XML character data.
func xmlText(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// serviceExec writes argv as a service file's Exec line, which dbus-daemon
// splits like a shell: each argument in single quotes.
func serviceExec(t testing.TB, argv []string) string {
	t.Helper()
	if len(argv) == 0 || !filepath.IsAbs(argv[0]) {
		t.Fatalf("desktop: a service's command must start with an absolute path, not %q", argv)
	}
	quoted := make([]string, len(argv))
	for i, a := range argv {
		if strings.ContainsAny(a, "'\n") {
			t.Fatalf("desktop: a service's argument %q holds a quote or a newline", a)
		}
		quoted[i] = "'" + a + "'"
	}
	return strings.Join(quoted, " ")
}
