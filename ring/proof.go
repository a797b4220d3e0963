package ring

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strconv"
)

// proofDomain separates the join proof's HMAC from every other use of the
// cluster secret (forwarded bids, Kafka messages): a signature made for one
// can never pass for another.
const proofDomain = "bidgate ring join proof v1"

// Why a member's join proof does not check out. Neither error says anything
// about the secrets.
var (
	errNoProof  = errors.New("its metadata carries no join proof (a node without --cluster-secret, or of a version before join proofs)")
	errBadProof = errors.New("its join proof is not made with this node's cluster secret (a wrong or stale --cluster-secret, or a proof copied from another node)")
)

// prover makes this node's join proof and checks the others'. A node is
// admitted to the ownership ring only once it has shown, in the metadata it
// gossips, an HMAC-SHA256 under the cluster secret over its memberlist name
// (one per process incarnation) and everything the ring uses of it: id,
// internal and public addresses, roles, birth and the leaving flag. The
// gossip key only lets a process talk to the cluster; the proof is what
// says it holds the cluster secret, so that it may own auctions and receive
// forwarded bids. Covering the name and the addresses means a proof seen on
// the wire is worth nothing under another name or pointing elsewhere.
//
// The gossip address is not covered: it is chosen by memberlist after the
// metadata is, and memberlist itself refuses a second address for a live
// name. Forwarded bids go to the internal address, which is covered.
type prover struct {
	secrets [][]byte // the first signs; any of them verifies (two during a rotation)
}

func newProver(secret, previous []byte) prover {
	var p prover
	for _, s := range [][]byte{secret, previous} {
		if len(s) > 0 {
			p.secrets = append(p.secrets, s)
		}
	}
	return p
}

// enabled reports whether proofs are made and required: a ring without a
// cluster secret (development) admits every member unproven.
func (p prover) enabled() bool { return len(p.secrets) > 0 }

// prove returns the proof of md for the node named name, or "" without a
// secret.
func (p prover) prove(name string, md meta) string {
	if !p.enabled() {
		return ""
	}
	return base64.RawStdEncoding.EncodeToString(proofMAC(p.secrets[0], name, md))
}

// check verifies md.Proof for the node named name against every secret.
func (p prover) check(name string, md meta) error {
	if md.Proof == "" {
		return errNoProof
	}
	got, err := base64.RawStdEncoding.DecodeString(md.Proof)
	if err != nil || len(got) != sha256.Size {
		return errBadProof
	}
	for _, s := range p.secrets {
		if hmac.Equal(got, proofMAC(s, name, md)) {
			return nil
		}
	}
	return errBadProof
}

// proofMAC is the HMAC-SHA256 under secret of the domain, name and md's
// fields, each length-prefixed so that no two different inputs give the
// same bytes.
func proofMAC(secret []byte, name string, md meta) []byte {
	m := hmac.New(sha256.New, secret)
	leaving := "0"
	if md.Leaving {
		leaving = "1"
	}
	parts := []string{proofDomain, name, md.ID, md.InternalAddr, md.PublicAddr,
		strconv.FormatInt(md.Birth, 10), leaving, strconv.Itoa(len(md.Roles))}
	parts = append(parts, md.Roles...)
	var n [4]byte
	for _, part := range parts {
		binary.BigEndian.PutUint32(n[:], uint32(len(part)))
		m.Write(n[:])
		m.Write([]byte(part))
	}
	return m.Sum(nil)
}
