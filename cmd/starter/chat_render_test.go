package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/sessionflow/sessionflow/client"
)

// TestChatViewRetriedCallStartsOver pins that the chat, like `turn`, says
// when a model call was retried and prints the new attempt's text after
// that line, not glued to the discarded draft.
func TestChatViewRetriedCallStartsOver(t *testing.T) {
	var out bytes.Buffer
	v := newTurnView(&chat{w: &out})
	ctx := context.Background()
	v.show(ctx, client.TurnProgress{Kind: client.ProgressText, Turn: 1, Step: 1, Text: "draft that was cut"})
	v.show(ctx, client.TurnProgress{Kind: client.ProgressText, Turn: 1, Step: 1, Text: "the stored answer", Restart: true})
	want := "draft that was cut\n↻ (the model call was retried; the text above is discarded)\nthe stored answer"
	if got := out.String(); got != want {
		t.Fatalf("the chat printed\n%q\nwant\n%q", got, want)
	}
	if got := v.shown[1]; got != "the stored answer" {
		t.Fatalf("the step's shown text is %q after the restart, want only the new attempt's", got)
	}
}
