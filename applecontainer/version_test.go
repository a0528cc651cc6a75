package applecontainer

import (
	"errors"
	"testing"
)

func TestParseVersion(t *testing.T) {
	tests := []struct {
		out, want string
	}{
		// ReleaseVersion.singleLine since 0.6.0.
		{"container CLI version 1.2.2 (build: release, commit: 0190097)\n", "1.2.2"},
		{"container CLI version 1.1.0 (build: debug, commit: unspecified)\n", "1.1.0"},
		// 0.1.0 added the SDK.
		{"container CLI version 0.1.0 (build: release, commit: 4f2c3d1, sdk: MacOS 15)\n", "0.1.0"},
		// A version that is no release yet.
		{"container CLI version 1.3.0-rc.1 (build: release, commit: abc1234)\n", "1.3.0-rc.1"},
		// Other plausible forms.
		{"container version 1.2.2\n", "1.2.2"},
		{"container CLI version: v1.2.1\n", "1.2.1"},
		{"Version 1.2\n", "1.2.0"},
		{"1.2.2\n", "1.2.2"},
		{"v1.2.2\n", "1.2.2"},
		{"\n  1.0.0  \n", "1.0.0"},
		// The API server's banner in system status, up to 1.2.2 at least (recorded
		// on 1.1.0: gascan's fixtures; cspace's 0.12.3 table).
		{"container-apiserver version 1.1.0 (build: release, commit: 5973b9c)", "1.1.0"},
		{"container-apiserver version 0.12.3 (build: release, commit: unspeci)", "0.12.3"},
		// Homebrew's and MacPorts' builds from 1.2.1 name no real commit.
		{"container CLI version 1.2.2 (build: release, commit: unspeci)\n", "1.2.2"},
		{"container CLI version 1.2.1 (build: release, commit: n/a)\n", "1.2.1"},
		// A development build: its release plus commits, as metadata.
		{"container CLI version 1.1.0-23-g7b94575 (build: release, commit: 7b94575)\n", "1.1.0+23.g7b94575"},
		{"container CLI version 0.0.1-dev-5-g87a989d (build: debug, commit: 87a989d)\n", "0.0.1-dev+5.g87a989d"},
		{"container-apiserver version 1.0.0-23-g7b94575-dirty (build: debug, commit: 7b94575)", "1.0.0+23.g7b94575.dirty"},
		// A debug build's warning, should it reach stdout, comes first.
		{"Warning! Running debug build. Performance may be degraded.\ncontainer CLI version 1.2.2 (build: debug, commit: 0190097)\n", "1.2.2"},
	}
	for _, tt := range tests {
		t.Run(tt.out, func(t *testing.T) {
			v, err := parseVersion(tt.out)
			if err != nil {
				t.Fatal(err)
			}
			if v.String() != tt.want {
				t.Errorf("version %s, want %s", v, tt.want)
			}
		})
	}
}

func TestParseVersionRefuses(t *testing.T) {
	tests := []struct {
		out  string
		want error
	}{
		{"", errNoVersion},
		{"container CLI (build: release, commit: 0190097)\n", errNoVersion},
		{"OVERVIEW: A container platform for macOS\n", errNoVersion},
		{"commit 1.2.2.3.4 (build: release)\n", errNoVersion},
		// MacPorts' port up to 1.2.0 (macports/macports-ports PR #33932),
		// and its API server's banner.
		{"container CLI version  (build: release, commit: )\n", errEmptyVersion},
		{"container-apiserver version  (build: release, commit: )", errEmptyVersion},
	}
	for _, tt := range tests {
		t.Run(tt.out, func(t *testing.T) {
			if v, err := parseVersion(tt.out); !errors.Is(err, tt.want) {
				t.Errorf("parseVersion = %v, %v; want %v", v, err, tt.want)
			}
		})
	}
}

// A development build sorts with its release, not below it: it is the
// release plus commits. It is the same version as another build only if
// it is the same build.
func TestVersionOrder(t *testing.T) {
	tests := []struct {
		a, b       string
		aLessThanB bool
		same       bool
	}{
		{"1.1.0-23-g7b94575", "1.1.0", false, false},
		{"1.1.0-23-g7b94575", "1.1.0-23-g7b94575", false, true},
		{"1.1.0-23-g7b94575", "1.1.0-24-g0000000", false, false},
		{"1.0.0-23-g7b94575", "1.1.0", true, false},
		{"1.3.0-rc.1", "1.3.0", true, false}, // a real pre-release stays one
		{"1.2.2", "1.2.2", false, true},
		{"1.2.2", "1.4.1", true, false},
	}
	for _, tt := range tests {
		t.Run(tt.a+" "+tt.b, func(t *testing.T) {
			a, err := newVersion(tt.a)
			if err != nil {
				t.Fatal(err)
			}
			b, err := newVersion(tt.b)
			if err != nil {
				t.Fatal(err)
			}
			if got := a.LessThan(b); got != tt.aLessThanB {
				t.Errorf("%s < %s = %v", a, b, got)
			}
			if got := sameVersion(a, b); got != tt.same {
				t.Errorf("sameVersion(%s, %s) = %v", a, b, got)
			}
		})
	}
}

func TestParseSystemVersion(t *testing.T) {
	tests := []struct {
		out, want string
		err       bool
	}{
		{`[{"appName":"container","buildType":"release","commit":"0190097d06df0b9065f4c2d2c7873c649d81d493","version":"1.2.2"},` +
			`{"appName":"container-apiserver","buildType":"release","commit":"ee848e3ebfd7c73b04dd419683be54fb450b8779","version":"1.0.0"}]`, "1.2.2", false},
		// Before 1.0.0 keys were not sorted.
		{`[{"version":"0.12.3","buildType":"release","commit":"f9899013fd43dd058fdf89709eed0b0861bfd931","appName":"container"}]`, "0.12.3", false},
		{`[{"appName":"container-apiserver","version":"1.2.2"}]`, "", true},
		// Up to 1.2.2 at least the server's entry is its banner (gascan's release
		// gate, 1.1.0); the CLI's is bare.
		{`[{"appName":"container","buildType":"release","commit":"5973b9cc626a3e7a499bb316a958237ebe14e2ed","version":"1.1.0"},` +
			`{"appName":"container-apiserver","buildType":"release","commit":"5973b9cc626a3e7a499bb316a958237ebe14e2ed","version":"container-apiserver version 1.1.0 (build: release, commit: 5973b9c)"}]`, "1.1.0", false},
		// MacPorts up to 1.2.0: no version.
		{`[{"appName":"container","buildType":"release","commit":"","version":""}]`, "", true},
		{`COMPONENT VERSION BUILD COMMIT`, "", true},
	}
	for _, tt := range tests {
		v, err := parseSystemVersion([]byte(tt.out))
		if (err != nil) != tt.err {
			t.Errorf("%s: err = %v", tt.out, err)
			continue
		}
		if err == nil && v.String() != tt.want {
			t.Errorf("%s: version %s, want %s", tt.out, v, tt.want)
		}
	}
}
