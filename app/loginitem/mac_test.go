package loginitem

import (
	"errors"
	"strings"
	"testing"
)

// fakeService is SMAppService.mainAppService in memory.
type fakeService struct {
	path      string
	bundled   bool
	st        macStatus
	statusErr error
	// afterRegister is the status register leaves; regErr its error.
	afterRegister macStatus
	regErr        error
	calls         []string
}

func (f *fakeService) bundle() (string, bool) { return f.path, f.bundled }

func (f *fakeService) status() (macStatus, error) { return f.st, f.statusErr }

func (f *fakeService) register() error {
	f.calls = append(f.calls, "register")
	f.st = f.afterRegister
	return f.regErr
}

func (f *fakeService) unregister() error {
	f.calls = append(f.calls, "unregister")
	f.st = macNotRegistered
	return nil
}

func installed() *fakeService {
	return &fakeService{path: "/Applications/Carapace.app", bundled: true, afterRegister: macEnabled}
}

func TestMacEnabled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		st      macStatus
		want    bool
		wantErr error
	}{
		{macNotRegistered, false, nil},
		{macEnabled, true, nil},
		{macRequiresApproval, false, ErrNeedsApproval},
		{macNotFound, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.st.String(), func(t *testing.T) {
			t.Parallel()
			f := installed()
			f.st = tt.st
			got, err := (&macItem{svc: f}).Enabled()
			if got != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Errorf("Enabled = %v, %v; want %v, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestMacNotABundle(t *testing.T) {
	t.Parallel()
	f := &fakeService{path: "", bundled: false}
	m := &macItem{svc: f}
	if on, err := m.Enabled(); on || !errors.Is(err, ErrUnsupported) {
		t.Errorf("Enabled = %v, %v; want ErrUnsupported", on, err)
	}
	if err := m.SetEnabled(true); !errors.Is(err, ErrUnsupported) || len(f.calls) != 0 {
		t.Errorf("SetEnabled = %v (calls %v); want ErrUnsupported and nothing registered", err, f.calls)
	}
}

func TestMacOldMacOS(t *testing.T) {
	t.Parallel()
	f := installed()
	f.statusErr = ErrUnsupported
	m := &macItem{svc: f}
	if _, err := m.Enabled(); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Enabled: %v", err)
	}
	if err := m.SetEnabled(true); !errors.Is(err, ErrUnsupported) || len(f.calls) != 0 {
		t.Errorf("SetEnabled = %v (calls %v)", err, f.calls)
	}
}

func TestMacSetEnabled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		path    string
		st      macStatus
		after   macStatus
		regErr  error
		on      bool
		calls   string
		wantErr string // a part of the error; "" for none
		isErr   error
	}{
		{name: "register", path: "/Applications/Carapace.app", on: true, after: macEnabled, calls: "register"},
		{name: "in ~/Applications", path: "/Users/u/Applications/Carapace.app", on: true, after: macEnabled, calls: "register"},
		{name: "already on", path: "/Applications/Carapace.app", st: macEnabled, on: true},
		{name: "unregister", path: "/Applications/Carapace.app", st: macEnabled, calls: "unregister"},
		{name: "unregister waiting for approval", path: "/Applications/Carapace.app", st: macRequiresApproval, calls: "unregister"},
		{name: "already off", path: "/Applications/Carapace.app"},
		{name: "off, not found", path: "/Applications/Carapace.app", st: macNotFound},
		{name: "needs approval", path: "/Applications/Carapace.app", on: true, after: macRequiresApproval, calls: "register", isErr: ErrNeedsApproval},
		{name: "needs approval, register errs", path: "/Applications/Carapace.app", on: true, after: macRequiresApproval,
			regErr: errors.New("Operation not permitted (SMAppServiceErrorDomain 1)"), calls: "register", isErr: ErrNeedsApproval},
		{name: "register fails", path: "/Applications/Carapace.app", on: true, after: macNotRegistered,
			regErr: errors.New("Invalid argument"), calls: "register", wantErr: "Invalid argument"},
		{name: "register has no effect", path: "/Applications/Carapace.app", on: true, after: macNotFound, calls: "register", wantErr: "not found"},
		{name: "run from Downloads", path: "/Users/u/Downloads/Carapace.app", on: true, wantErr: "move Carapace.app to /Applications"},
		{name: "translocated", path: "/private/var/folders/xy/T/AppTranslocation/1234/d/Carapace.app", on: true, wantErr: "/Applications"},
		{name: "a look-alike folder", path: "/Applications2/Carapace.app", on: true, wantErr: "/Applications"},
		{name: "off from anywhere", path: "/Users/u/Downloads/Carapace.app", st: macEnabled, calls: "unregister"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeService{path: tt.path, bundled: true, st: tt.st, afterRegister: tt.after, regErr: tt.regErr}
			err := (&macItem{svc: f, home: "/Users/u"}).SetEnabled(tt.on)
			if got := strings.Join(f.calls, ","); got != tt.calls {
				t.Errorf("calls %q, want %q", got, tt.calls)
			}
			switch {
			case tt.isErr != nil:
				if !errors.Is(err, tt.isErr) {
					t.Errorf("SetEnabled = %v, want %v", err, tt.isErr)
				}
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("SetEnabled = %v, want an error with %q", err, tt.wantErr)
				}
			case err != nil:
				t.Errorf("SetEnabled = %v", err)
			}
		})
	}
}

func TestMacInstalled(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]bool{
		"/Applications/Carapace.app":         true,
		"/Applications/Tools/Carapace.app":   true,
		"/Users/u/Applications/Carapace.app": true,
		"/Applications/../tmp/Carapace.app":  false,
		"/Applications":                      false,
		"/Volumes/Carapace/Carapace.app":     false,
		"/Users/v/Applications/Carapace.app": false,
	} {
		if got := macInstalled(path, "/Users/u"); got != want {
			t.Errorf("macInstalled(%q) = %v, want %v", path, got, want)
		}
	}
}
