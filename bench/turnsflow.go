package bench

import "errors"

// sessionflowDriver returns the driver of sessionflow's turns.
func (e *env) sessionflowDriver() (turnDriver, error) {
	return nil, errors.New("the session workflow of this build runs no turns")
}
