package workerapp

import (
	"flag"
	"fmt"
	"slices"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/wire"
)

// The environment variables of the permission defaults.
const (
	EnvSandboxMode    = "SESSIONFLOW_SANDBOX_MODE"
	EnvApprovalPolicy = "SESSIONFLOW_APPROVAL_POLICY"
	EnvPreset         = "SESSIONFLOW_PRESET"
)

// permissionFlags are the worker's permission defaults (--sandbox-mode,
// --approval-policy, --preset).
type permissionFlags struct {
	sandboxMode, approvalPolicy, preset string
}

func addPermissionFlags(fs *flag.FlagSet) *permissionFlags {
	f := &permissionFlags{}
	fs.StringVar(&f.sandboxMode, "sandbox-mode", "", "sandbox mode of the sessions whose agentOptions and log set none: read-only, workspace-write or danger-full-access; empty = "+wire.DefaultSandboxMode+" (env "+EnvSandboxMode+")")
	fs.StringVar(&f.approvalPolicy, "approval-policy", "", "approval policy of the sessions whose agentOptions and log set none: ask or never; empty = "+wire.DefaultApprovalPolicy+" (env "+EnvApprovalPolicy+")")
	fs.StringVar(&f.preset, "preset", "", "permission preset of the sessions whose agentOptions and log set none, both defaults at once: read-only, workspace-write or danger-full-access (env "+EnvPreset+"; --sandbox-mode and --approval-policy must agree with it)")
	return f
}

// config resolves the flags against the environment.
func (f *permissionFlags) config(pick func(flagName, envName, flagValue string) (string, string)) (activities.PermissionDefaults, error) {
	var d activities.PermissionDefaults
	mode, modeSrc := pick("sandbox-mode", EnvSandboxMode, f.sandboxMode)
	if mode != "" && !slices.Contains(wire.SandboxModes, mode) {
		return d, fmt.Errorf("%s: %q is not a sandbox mode (read-only, workspace-write or danger-full-access)", modeSrc, mode)
	}
	policy, policySrc := pick("approval-policy", EnvApprovalPolicy, f.approvalPolicy)
	if policy != "" && !slices.Contains(wire.ApprovalPolicies, policy) {
		return d, fmt.Errorf("%s: %q is not an approval policy (ask or never)", policySrc, policy)
	}
	if preset, src := pick("preset", EnvPreset, f.preset); preset != "" {
		m, a, ok := wire.PresetBundle(preset)
		if !ok {
			return d, fmt.Errorf("%s: %q is not a permission preset (read-only, workspace-write or danger-full-access)", src, preset)
		}
		if (mode != "" && mode != m) || (policy != "" && policy != a) {
			return d, fmt.Errorf("%s: the preset %s is sandbox mode %s and approval policy %s, which %s and %s contradict", src, preset, m, a, modeSrc, policySrc)
		}
		mode, policy = m, a
	}
	d.SandboxMode, d.ApprovalPolicy = mode, policy
	return d, nil
}
