package authstore

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

type binding struct {
	Name string `json:"name"`
}

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := s.LoadUsers(); err != nil || len(u) != 0 {
		t.Fatalf("empty store: %v, %v", u, err)
	}
	users := Users{"alice": {"SCRAM-SHA-256": {Salt: []byte("salt"), Iterations: 4096, StoredKey: []byte{1, 2}, ServerKey: []byte{3, 4}}}}
	if err := s.SaveUsers(users); err != nil {
		t.Fatal(err)
	}
	if err := SaveACLs(s, []binding{{"a"}, {"b"}}); err != nil {
		t.Fatal(err)
	}
	secret, err := s.Secret()
	if err != nil {
		t.Fatal(err)
	}

	s2, err := Open(dir) // as after a restart
	if err != nil {
		t.Fatal(err)
	}
	got, err := s2.LoadUsers()
	if err != nil || !reflect.DeepEqual(got, users) {
		t.Errorf("users: got %v, %v; want %v", got, err, users)
	}
	acls, err := LoadACLs[binding](s2)
	if err != nil || !reflect.DeepEqual(acls, []binding{{"a"}, {"b"}}) {
		t.Errorf("acls: got %v, %v", acls, err)
	}
	if again, err := s2.Secret(); err != nil || !bytes.Equal(again, secret) {
		t.Errorf("secret changed across an open: %v", err)
	}
	for _, name := range []string{usersFile, aclsFile, secretFile} {
		fi, err := os.Stat(filepath.Join(s.Dir(), name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", name, fi.Mode().Perm())
		}
		if _, err := os.Stat(filepath.Join(s.Dir(), name+".tmp")); !os.IsNotExist(err) {
			t.Errorf("%s.tmp left behind", name)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(s.Dir(), usersFile)); bytes.Contains(b, []byte("password")) {
		t.Error("credential file mentions a password")
	}
}

func TestRefusesUnknownVersion(t *testing.T) {
	s, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.Dir(), usersFile), []byte(`{"version":7,"users":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoadUsers(); err == nil {
		t.Error("want an error for format version 7")
	}
	if err := os.WriteFile(filepath.Join(s.Dir(), aclsFile), []byte(`{"version":1,`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadACLs[binding](s); err == nil {
		t.Error("want an error for a torn file")
	}
}
