package session

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sessionflow/sessionflow/wire"
)

// foldOf folds events given as (type, data) pairs, numbered in order.
func foldOf(pairs ...string) PermissionFold {
	var events []Event
	for i := 0; i < len(pairs); i += 2 {
		events = append(events, mk(pairs[i], int64(i/2), pairs[i+1]))
	}
	return FoldPermissions(events)
}

// The values below are what the harness's folds (effectiveSandboxMode,
// effectiveApprovalPolicy, effectivePermissionPreset of the pinned
// packages) give for the same events; testsuite/harness
// TestPermissionFoldMatchesHarness checks them against the packages.
func TestPermissionFoldKnobs(t *testing.T) {
	cases := []struct {
		name                 string
		events               []string
		mode, policy, preset string
	}{
		{name: "none", events: []string{"turn/start", `{"turn":1}`}},
		{name: "the last of each",
			events: []string{"sandbox/mode", `{"mode":"read-only"}`, "approval/policy", `{"policy":"ask"}`, "permission/preset", `{"preset":"read-only"}`,
				"sandbox/mode", `{"mode":"danger-full-access","source":"delegation"}`, "approval/policy", `{"policy":"never"}`, "permission/preset", `{"preset":"danger-full-access"}`},
			mode: "danger-full-access", policy: "never", preset: "danger-full-access"},
		{name: "an unknown value is in effect, not the one before it",
			events: []string{"sandbox/mode", `{"mode":"danger-full-access"}`, "sandbox/mode", `{"mode":"wide-open"}`,
				"approval/policy", `{"policy":"never"}`, "approval/policy", `{"policy":"sometimes"}`,
				"permission/preset", `{"preset":"danger-full-access"}`, "permission/preset", `{"preset":"custom"}`},
			mode: "wide-open", policy: "sometimes", preset: "custom"},
		{name: "absent or null is none",
			events: []string{"sandbox/mode", `{"mode":"danger-full-access"}`, "sandbox/mode", `{"mode":null}`,
				"approval/policy", `{"policy":"never"}`, "approval/policy", `{"source":"delegation"}`,
				"permission/preset", `{"preset":"read-only"}`, "permission/preset", `{}`}},
		{name: "another value is its JSON text",
			events: []string{"sandbox/mode", `{"mode":"read-only"}`, "sandbox/mode", `{"mode":5}`,
				"approval/policy", `{"policy":"ask"}`, "approval/policy", `{"policy":["ask"]}`,
				"permission/preset", `{"preset":"read-only"}`, "permission/preset", `{"preset":""}`},
			mode: "5", policy: `["ask"]`, preset: `""`},
		{name: "names are exact",
			events: []string{"sandbox/mode", `{"mode":"read-only"}`, "sandbox/mode", `{"Mode":"danger-full-access"}`},
			mode:   ""},
	}
	for _, tc := range cases {
		f := foldOf(tc.events...)
		assert.Equal(t, [3]string{tc.mode, tc.policy, tc.preset}, [3]string{f.SandboxMode, f.ApprovalPolicy, f.Preset}, tc.name)
	}
}

func TestPermissionFoldRules(t *testing.T) {
	f := foldOf("approval/policy", `{"policy":"ask"}`)
	assert.False(t, f.HasRules)
	assert.Nil(t, f.Rules)

	f = foldOf("approval/rules", `{"rules":[{"tool":"bash","commandPrefix":"go test"}]}`,
		"approval/rules", `{"rules":[{"tool":"write","pathPrefix":"src"},{"tool":"read"}]}`)
	assert.True(t, f.HasRules)
	assert.Equal(t, []wire.ApprovalRule{{Tool: "write", PathPrefix: "src"}, {Tool: "read"}}, f.Rules)

	// The last one is in effect even when it does not decode: it allows
	// nothing, rather than leaving the earlier rules in force.
	f = foldOf("approval/rules", `{"rules":[{"tool":"bash"}]}`, "approval/rules", `{"rules":"all"}`)
	assert.True(t, f.HasRules)
	assert.Nil(t, f.Rules)

	f = foldOf("approval/rules", `{"rules":[{"tool":"bash"}]}`, "approval/rules", `{"rules":[]}`)
	assert.True(t, f.HasRules)
	assert.Empty(t, f.Rules)
}

func TestPermissionFoldOpenApprovals(t *testing.T) {
	ids := func(f PermissionFold) []string {
		var out []string
		for _, o := range f.Open() {
			out = append(out, o.ID)
		}
		return out
	}
	var f PermissionFold
	steps := []struct {
		typ, data string
		open      []string
	}{
		{"turn/start", `{"turn":1}`, nil},
		{"approval/asked", `{"id":"a","toolName":"bash","callId":"c1","reason":"escalate"}`, []string{"a"}},
		{"approval/asked", `{"id":"b","toolName":"write"}`, []string{"a", "b"}},
		{"approval/decided", `{"id":"a","outcome":"allowed-once"}`, []string{"b"}},
		{"approval/decided", `{"id":"nobody","outcome":"rejected"}`, []string{"b"}},
		// Asked again while open: one entry, the later ask's.
		{"approval/asked", `{"id":"b","toolName":"write","reason":"again"}`, []string{"b"}},
		{"approval/asked", `{"id":7,"toolName":"bash"}`, []string{"b"}},
		{"turn/end", `{"turn":1,"reason":{"kind":"interrupted"}}`, nil},
		{"turn/start", `{"turn":2}`, nil},
		{"approval/decided", `{"id":"b","outcome":"cancelled"}`, nil},
		{"approval/asked", `{"id":"c","toolName":"bash"}`, []string{"c"}},
	}
	var copies []PermissionFold
	for i, s := range steps {
		f.Add(mk(s.typ, int64(i), s.data))
		assert.Equal(t, s.open, ids(f), "after %s %s", s.typ, s.data)
		copies = append(copies, f)
	}
	assert.Equal(t, []OpenApproval{{Seq: 10, ID: "c", ToolName: "bash"}}, f.Open())
	// A copy is a fold of its own: what was folded after it leaves it as
	// it was.
	for i, c := range copies {
		assert.Equal(t, steps[i].open, ids(c), "the copy after step %d", i)
	}
	assert.Equal(t, []OpenApproval{{Seq: 5, ID: "b", ToolName: "write", Reason: "again"}}, copies[6].Open())
	assert.Equal(t, []OpenApproval{{Seq: 1, ID: "a", ToolName: "bash", CallID: "c1", Reason: "escalate"}, {Seq: 2, ID: "b", ToolName: "write"}}, copies[2].Open())
}
