// Package version names the Carapace version that plugin manifests'
// app_compat ranges are checked against.
package version

import (
	"fmt"

	"github.com/Masterminds/semver/v3"
)

// Base is the version of this source tree. A build stamped with a version
// that is not semantic (a git hash, "dev") is treated as Base.
const Base = "0.1.0"

// Semver returns v when it is a semantic version ("v" prefix allowed) and
// Base otherwise. Pre-release and build metadata are dropped: a
// development build of 0.2.0 satisfies ">=0.2.0".
func Semver(v string) string {
	sv, err := semver.NewVersion(v)
	if err != nil {
		return Base
	}
	return fmt.Sprintf("%d.%d.%d", sv.Major(), sv.Minor(), sv.Patch())
}
