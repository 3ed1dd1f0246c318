package workflows

import (
	"encoding/json"
	"fmt"

	"github.com/sessionflow/sessionflow/wire"
)

// sendableInput refuses, with InvalidArgument, a user input whose content
// holds a block the agent cannot send to a model: user input carries text
// blocks only (docs/API.md "InputRequest"). An image or other media block
// no provider of this build sends would end every later turn with the
// provider's refusal, and a tool-result block would forge a tool's answer
// in the conversation. It runs in the input updates' validator only, so a
// history that accepted such a block replays unchanged (the agent's
// conversation replaces a stored one by a note; docs/DECISIONS.md D66).
func sendableInput(name string, msg json.RawMessage) error {
	var m struct {
		Content []struct {
			Type string `json:"type"`
		} `json:"content"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return invalidArgument(fmt.Sprintf("%s: content: %s", name, err))
	}
	for i, b := range m.Content {
		if b.Type != wire.BlockText {
			return invalidArgument(fmt.Sprintf("%s: content[%d] is a %q block; user input carries only %q blocks (the agent cannot send any other)",
				name, i, b.Type, wire.BlockText))
		}
	}
	return nil
}
