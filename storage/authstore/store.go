// Package authstore persists what security needs to survive a restart:
// the ACL bindings, the users' SCRAM credentials (salt, iterations,
// StoredKey and ServerKey — never a password) and a server secret, under
// <data>/__cluster/security/. Every write is tmp + fsync + rename + a
// directory fsync, and the files holding credentials are readable by
// their owner only.
package authstore

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"kaas/storage/durable"
	"kaas/storage/vfs"
)

const (
	aclsFile    = "acls.json"
	usersFile   = "scram-credentials.json"
	secretFile  = "secret"
	formatV1    = 1
	privateMode = 0o600
)

// Credential is one user's SCRAM credential for one mechanism (RFC 5802:
// StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey =
// HMAC(SaltedPassword, "Server Key")).
type Credential struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// Users maps user name → mechanism name ("SCRAM-SHA-256") → credential.
type Users map[string]map[string]Credential

// Store reads and writes the files of one data directory. It does not
// serialise writers: the broker (or the offline `kaas users` command,
// with no broker running) is the only writer.
type Store struct{ dir string }

// Open uses <data>/__cluster/security, creating it.
func Open(dataDir string) (*Store, error) {
	dir := filepath.Join(dataDir, "__cluster", "security")
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("creating %s: %w", dir, err)
		}
		if err := durable.SyncDir(vfs.OS, filepath.Dir(dir)); err != nil {
			return nil, err
		}
	}
	return &Store{dir: dir}, nil
}

// Dir is where the files live.
func (s *Store) Dir() string { return s.dir }

type usersDoc struct {
	Version int   `json:"version"`
	Users   Users `json:"users"`
}

// LoadUsers reads every credential; no file means no users.
func (s *Store) LoadUsers() (Users, error) {
	var doc usersDoc
	if err := s.read(usersFile, &doc); err != nil {
		return nil, err
	}
	if doc.Users == nil {
		doc.Users = Users{}
	}
	return doc.Users, nil
}

// SaveUsers replaces every credential, durably.
func (s *Store) SaveUsers(u Users) error {
	return s.write(usersFile, usersDoc{Version: formatV1, Users: u})
}

type aclsDoc[B any] struct {
	Version int `json:"version"`
	ACLs    []B `json:"acls"`
}

// LoadACLs reads the bindings into a slice of B (the authorizer's binding
// type, which storage does not know).
func LoadACLs[B any](s *Store) ([]B, error) {
	var doc aclsDoc[B]
	err := s.read(aclsFile, &doc)
	return doc.ACLs, err
}

// SaveACLs replaces every binding, durably.
func SaveACLs[B any](s *Store, acls []B) error {
	return s.write(aclsFile, aclsDoc[B]{Version: formatV1, ACLs: acls})
}

// Secret returns this data directory's 32-byte server secret, creating it
// on first use. It keys the made-up SCRAM salts of unknown users, which
// must stay the same across restarts (a salt that changed would tell an
// unknown user from a real one).
func (s *Store) Secret() ([]byte, error) {
	path := filepath.Join(s.dir, secretFile)
	b, err := os.ReadFile(path)
	if err == nil {
		if len(b) != 32 {
			return nil, fmt.Errorf("%s: want 32 bytes, found %d", path, len(b))
		}
		return b, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	b = make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	if err := durable.WriteFileMode(vfs.OS, path, b, privateMode); err != nil {
		return nil, err
	}
	return b, nil
}

func (s *Store) read(name string, v any) error {
	path := filepath.Join(s.dir, name)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var probe struct{ Version int }
	if err := json.Unmarshal(b, &probe); err != nil {
		return fmt.Errorf("parsing %s: %w", path, err)
	}
	if probe.Version != formatV1 {
		return fmt.Errorf("%s: unknown format version %d", path, probe.Version)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("parsing %s: %w", path, err)
	}
	return nil
}

func (s *Store) write(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteFileMode(vfs.OS, filepath.Join(s.dir, name), append(b, '\n'), privateMode)
}
