package lock

import (
	"strconv"
	"strings"
	"sync"
)

// slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of its
// hash tag, modulo 16384.
func slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	return crc16(key) % 16384
}

// crc16 is CRC-16/XMODEM (polynomial 0x1021, initial value 0), the
// checksum Redis Cluster uses for key slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// slotTag returns a short hash tag whose hash slot is s: the name of the
// slot's fence counter on a Redis Cluster embeds it (see Client.counter).
func slotTag(s uint16) string { return slotTags()[s] }

// slotTags maps each of the 16384 hash slots to the first string, in the
// order of the base-36 numerals "0", "1", ..., "z", "10", ..., that hashes
// to it. It is built once, on first use by a cluster Client (a few
// milliseconds: about 170,000 CRC16s of up to four bytes), and is the same
// in every process, which is what makes processes agree on the counters.
var slotTags = sync.OnceValue(func() *[16384]string {
	var tags [16384]string
	left := len(tags)
	for n := int64(0); left > 0; n++ {
		tag := strconv.FormatInt(n, 36)
		if s := crc16(tag) % 16384; tags[s] == "" {
			tags[s] = tag
			left--
		}
	}
	return &tags
})
