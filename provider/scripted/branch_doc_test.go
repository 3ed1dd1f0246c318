package scripted_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/sessionflow/sessionflow/provider"
)

// TestScriptedDocBranchesExample runs the branches example of
// docs/SCRIPTED.md (its third json block): the parent's conversation gets
// the subagent call, then its answer; a conversation whose first user
// message holds TASK-1 (the child's) gets ONE.
func TestScriptedDocBranchesExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/SCRIPTED.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := strings.Split(string(doc), "```json\n")
	if len(blocks) < 4 {
		t.Fatal("no third json example in docs/SCRIPTED.md")
	}
	example, _, _ := strings.Cut(blocks[3], "```")
	p := parse(t, example)
	ctx := context.Background()
	text := func(chunks []provider.Chunk) string {
		var b strings.Builder
		for _, c := range chunks {
			if c.Type == provider.ChunkText {
				b.WriteString(c.Delta)
			}
		}
		return b.String()
	}
	got, err := collect(t, ctx, p, conversation("parent", 0))
	if err != nil {
		t.Fatal(err)
	}
	var call string
	for _, c := range got {
		if c.Type == provider.ChunkToolCall && c.Name != "" {
			call = c.Name
		}
	}
	if call != "subagent" {
		t.Fatalf("the parent's first call: %+v, want a subagent call", got)
	}
	if got, err := collect(t, ctx, p, conversation("parent", 1)); err != nil || text(got) != "The child said ONE." {
		t.Fatalf("the parent's second call: %q %v", text(got), err)
	}
	child := conversation("child", 0)
	child.Messages[0].Content[0].Text = "TASK-1: reply ONE"
	if got, err := collect(t, ctx, p, child); err != nil || text(got) != "ONE" {
		t.Fatalf("the child's call: %q %v", text(got), err)
	}
}
