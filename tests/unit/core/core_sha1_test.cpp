// sha1_hex against the FIPS 180 test vectors, at every padding boundary.
#include "core/sha1.hpp"

#include <gtest/gtest.h>

#include <string>

using dlock::detail::sha1_hex;

TEST(sha1, matches_the_fips_180_test_vectors) {
    EXPECT_EQ(sha1_hex(""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    EXPECT_EQ(sha1_hex("abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
    EXPECT_EQ(sha1_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
              "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
    EXPECT_EQ(sha1_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmno"
                       "ijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
              "a49b2446a02c645bf419f995b67091253a04a259");
    EXPECT_EQ(sha1_hex(std::string(1'000'000, 'a')), "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
}

TEST(sha1, lengths_around_the_padding_boundaries) {
    // 55 bytes: length fits in the last block; 56: padding needs a second block; 64: whole
    // block plus a padding block. Digests computed with sha1sum(1).
    EXPECT_EQ(sha1_hex(std::string(55, 'x')), "cef734ba81a024479e09eb5a75b6ddae62e6abf1");
    EXPECT_EQ(sha1_hex(std::string(56, 'x')), "901305367c259952f4e7af8323f480d59f81335b");
    EXPECT_EQ(sha1_hex(std::string(64, 'x')), "bb2fa3ee7afb9f54c6dfb5d021f14b1ffe40c163");
}
