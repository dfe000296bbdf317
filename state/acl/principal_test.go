package acl

import (
	"crypto/x509/pkix"
	"encoding/asn1"
	"testing"
)

func rawName(t *testing.T, n pkix.Name) []byte {
	t.Helper()
	b, err := asn1.Marshal(n.ToRDNSequence())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Expected strings are what Java's X500Principal.getName() prints for the
// same names (the format Apache's default principal mapping uses).
func TestRFC2253(t *testing.T) {
	email := asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 1}
	for _, tc := range []struct {
		name pkix.Name
		want string
	}{
		{pkix.Name{CommonName: "alice"}, "CN=alice"},
		{pkix.Name{Country: []string{"US"}, Organization: []string{"Acme"}, OrganizationalUnit: []string{"eng"}, CommonName: "alice"},
			"CN=alice,OU=eng,O=Acme,C=US"},
		{pkix.Name{Province: []string{"CA"}, Locality: []string{"SF"}, StreetAddress: []string{"1 Main"}, CommonName: "b"},
			"CN=b,STREET=1 Main,L=SF,ST=CA"},
		{pkix.Name{CommonName: "Smith, John+Jr <x>;\"q\"\\ #=y"}, `CN=Smith\, John\+Jr \<x\>\;\"q\"\\ \#\=y`},
		{pkix.Name{CommonName: "  padded "}, `CN=\ \ padded\ `},
		{pkix.Name{CommonName: "é"}, "CN=é"},
		// Types without an RFC 2253 keyword: the OID and the hex of the
		// value's DER encoding (here a UTF8String and a PrintableString).
		{pkix.Name{CommonName: "c", ExtraNames: []pkix.AttributeTypeAndValue{{Type: email, Value: "a@b.c"}}},
			"1.2.840.113549.1.9.1=#0c056140622e63,CN=c"},
		{pkix.Name{SerialNumber: "42", CommonName: "d"}, "2.5.4.5=#13023432,CN=d"},
	} {
		if got := RFC2253(rawName(t, tc.name)); got != tc.want {
			t.Errorf("%v: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
