package applecontainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/Masterminds/semver/v3"

	"github.com/carapace-dev/carapace/core/runtime"
)

// Versions of Apple's container CLI that matter here.
const (
	// MinVersion is the oldest version Check accepts: the first that gives
	// a host socket mounted with -v the host's permissions inside the VM
	// (apple/container PR #1751).
	MinVersion = "1.1.0"
	// RecommendedVersion is the oldest version Check accepts without a
	// warning: 1.2.0 applies read-only /proc paths that cannot be overridden
	// before 1.2.1, and the socket relay has had fixes since 1.1.0.
	RecommendedVersion = "1.2.1"
)

var (
	minVersion         = semver.MustParse(MinVersion)
	recommendedVersion = semver.MustParse(RecommendedVersion)
)

// ReleasesURL is where Apple's container CLI is downloaded from.
const ReleasesURL = "https://github.com/apple/container/releases"

// The version in `container --version`. The CLI prints
// "container CLI version 1.2.2 (build: release, commit: abc1234)"
// (ContainerVersion/ReleaseVersion.swift, since 0.6.0); 0.1.0 added
// ", sdk: MacOS 15" inside the parentheses. versionWordRE takes the
// version after the word "version", whatever the program's name;
// bareVersionRE takes a line that holds nothing but a version.
var (
	versionWordRE = regexp.MustCompile(`(?i)\bversion:?\s+v?(\d+\.\d+(?:\.\d+)?(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?)`)
	bareVersionRE = regexp.MustCompile(`^\s*v?(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?)\s*$`)
)

// errNoVersion: the output holds no version this package recognises.
var errNoVersion = errors.New("no version in the output")

// parseVersion finds the CLI's version in the output of `container
// --version`.
func parseVersion(out string) (*semver.Version, error) {
	if m := versionWordRE.FindStringSubmatch(out); m != nil {
		return semver.NewVersion(m[1])
	}
	for line := range strings.Lines(out) {
		if m := bareVersionRE.FindStringSubmatch(line); m != nil {
			return semver.NewVersion(m[1])
		}
	}
	return nil, fmt.Errorf("%q: %w", firstLine(out), errNoVersion)
}

// versionInfo is one entry of `container system version --format json`
// (SystemVersion.swift, since 0.10.0): the CLI's and, when the API server
// answers, the server's.
type versionInfo struct {
	AppName   string `json:"appName"`
	Version   string `json:"version"`
	BuildType string `json:"buildType"`
	Commit    string `json:"commit"`
}

// parseSystemVersion finds the CLI's version, the entry named "container",
// in the output of `container system version --format json`.
func parseSystemVersion(out []byte) (*semver.Version, error) {
	var infos []versionInfo
	if err := json.Unmarshal(out, &infos); err != nil {
		return nil, fmt.Errorf("system version: %w", err)
	}
	for _, in := range infos {
		if in.AppName == "container" {
			return semver.NewVersion(in.Version)
		}
	}
	return nil, fmt.Errorf("system version: no entry for the CLI: %w", errNoVersion)
}

// tooOld is the error for a CLI or an API server older than MinVersion:
// why Carapace cannot use it, and what to install.
func tooOld(what string, v *semver.Version, fix string) error {
	return fmt.Errorf("container %s %s is too old: Carapace needs Apple's container %s or later, because before %s "+
		"a host socket mounted into the container with -v cannot be reached from inside the VM by a non-root process "+
		"(apple/container issue #1750, PR #1751), so the agent could not reach the core; %s: %w",
		what, v, MinVersion, MinVersion, fix, runtime.ErrUnavailable)
}

// installHint says what to install and where from.
var installHint = fmt.Sprintf("install %s or later (%s or later recommended) from %s", MinVersion, RecommendedVersion, ReleasesURL)

// firstLine returns s's first non-empty line, trimmed and cut to a length
// fit for an error message.
func firstLine(s string) string {
	for line := range strings.Lines(s) {
		if line = strings.TrimSpace(line); line != "" {
			if len(line) > 200 {
				line = line[:200] + "…"
			}
			return line
		}
	}
	return ""
}
