package harness

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/agent"
)

// The runtime-context snapshot sessionflow stores before a model request
// (agent.RuntimeContext) is, text and sections, the one the harness's
// services render for the same session (runtimecontext.mjs): every sandbox
// mode and approval policy, a cwd reached through a symbolic link, one with
// characters JSON escapes, and one that does not exist.
func TestRuntimeContextMatchesTheHarness(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real <&> \"quoted\" \u2028 ü")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	type input struct {
		SandboxMode    string `json:"sandboxMode"`
		ApprovalPolicy string `json:"approvalPolicy"`
		Cwd            string `json:"cwd"`
	}
	var cases []input
	for _, mode := range []string{"read-only", "workspace-write", "danger-full-access"} {
		for _, policy := range []string{"ask", "never"} {
			for _, cwd := range []string{dir, link, real, filepath.Join(dir, "missing", "..", "gone")} {
				cases = append(cases, input{mode, policy, cwd})
			}
		}
	}
	var in strings.Builder
	for _, c := range cases {
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		in.Write(b)
		in.WriteByte('\n')
	}
	var out []json.RawMessage
	runLines(t, "runtimecontext.mjs", in.String(), &out)
	if len(out) != len(cases) {
		t.Fatalf("runtimecontext.mjs rendered %d snapshots, want %d", len(out), len(cases))
	}
	for i, c := range cases {
		var h struct {
			Text     string                 `json:"text"`
			Sections []agent.ContextSection `json:"sections"`
			Error    string                 `json:"error"`
		}
		if err := json.Unmarshal(out[i], &h); err != nil || h.Error != "" {
			t.Fatalf("%+v: runtimecontext.mjs: %v %s", c, err, h.Error)
		}
		text, sections := agent.RuntimeContext(agent.ContextPolicy{SandboxMode: c.SandboxMode, ApprovalPolicy: c.ApprovalPolicy}, c.Cwd)
		if text != h.Text {
			t.Errorf("%+v:\nsessionflow %q\nharness     %q", c, text, h.Text)
		}
		if len(sections) != len(h.Sections) {
			t.Errorf("%+v: sections %v, harness %v", c, sections, h.Sections)
			continue
		}
		for j := range sections {
			if sections[j] != h.Sections[j] {
				t.Errorf("%+v: section %d %+v, harness %+v", c, j, sections[j], h.Sections[j])
			}
		}
	}
}
