package client

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	temporalclient "go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// An update input above the limit is refused before any call, typed; one
// at the limit is sent.
func TestUpdateInputLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var sent []string
	f := &fakeTemporal{update: func(opts temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
		sent = append(sent, opts.UpdateName)
		return nil, errors.New("sent")
	}}
	c := New(f, Options{TaskQueue: "tq"})
	// `{"content":"` + text + `"}`: 14 bytes around the text.
	at := func(size int) wire.InputRequest {
		return wire.InputRequest{Content: json.RawMessage(`"` + strings.Repeat("x", size-14) + `"`)}
	}

	_, err := c.Steer(ctx, "s1", at(1310721))
	require.ErrorIs(t, err, ErrInputTooLarge)
	require.Equal(t, "Steer input of 1310721 bytes exceeds the update input limit of 1310720 bytes (docs/API.md: Update input limit); nothing was sent", err.Error())
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, "s1", e.SessionID)
	_, err = c.Followup(ctx, "s1", at(10_000_000))
	require.ErrorIs(t, err, ErrInputTooLarge)
	big := session.Event{Type: "custom/x", Seq: 0, Ignorable: true, Data: json.RawMessage(`{"t":"` + strings.Repeat("y", 2_000_000) + `"}`)}
	_, err = c.Append(ctx, "s1", session.WireEvents([]session.Event{big}))
	require.ErrorIs(t, err, ErrInputTooLarge)
	require.Empty(t, sent, "an oversized input was sent")

	_, err = c.Inject(ctx, "s1", at(1310720))
	require.NotErrorIs(t, err, ErrInputTooLarge)
	require.Equal(t, []string{wire.UpdateInject}, sent)
}
