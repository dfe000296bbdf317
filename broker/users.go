package broker

import (
	"fmt"

	"kaas/state/sasl"
	"kaas/storage/authstore"
)

// AddUser stores a SCRAM credential for user in dataDir: what `kaas users
// add` does to create the first user before any broker runs (later users
// are added over the wire with AlterUserScramCredentials, e.g. kadm's
// AlterUserSCRAMs). Only the salt, iteration count, StoredKey and
// ServerKey are kept. No broker may be running on dataDir: it would not
// see the change, and would overwrite it with its own next change.
func AddUser(dataDir, user, mechanism, password string, iterations int) error {
	if user == "" {
		return fmt.Errorf("the user name is empty")
	}
	if sasl.MechanismCode(mechanism) == 0 {
		return fmt.Errorf("mechanism %q: want SCRAM-SHA-256 or SCRAM-SHA-512", mechanism)
	}
	if password == "" {
		return fmt.Errorf("the password is empty")
	}
	cred, err := sasl.NewCredential(mechanism, password, iterations)
	if err != nil {
		return err
	}
	st, err := authstore.Open(dataDir)
	if err != nil {
		return err
	}
	users, err := st.LoadUsers()
	if err != nil {
		return err
	}
	if users[user] == nil {
		users[user] = map[string]authstore.Credential{}
	}
	users[user][mechanism] = authstore.Credential(cred)
	return st.SaveUsers(users)
}
