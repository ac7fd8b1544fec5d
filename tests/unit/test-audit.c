/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for src/audit: the RFC 6962 tree against Certificate
 * Transparency's published vectors and against a naive second
 * implementation of the RFC's definitions; signed notes against the
 * published examples of the note format; the canonical serializer and its
 * checker; the builder's refusals; the writer's full queue. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "audit/audit-internal.h"

static void unhex(const char *s, unsigned char *out)
{
  for (size_t i = 0; s[2 * i]; i++) {
    unsigned v;
    sscanf(s + 2 * i, "%2x", &v);
    out[i] = (unsigned char)v;
  }
}

static void hexs(const unsigned char *h, char out[65])
{
  for (int i = 0; i < 32; i++)
    sprintf(out + 2 * i, "%02x", h[i]);
}

/* ---- RFC 6962: the test inputs and roots Certificate Transparency
 * implementations share (transparency-dev/merkle testonly, the C++ log's
 * merkle_tree_test) ---- */
static const char *const ct_leaves[] = {
  "", "00", "10", "2021", "3031", "40414243", "5051525354555657",
  "606162636465666768696a6b6c6d6e6f",
};
static const char *const ct_roots[] = {
  "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
  "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
  "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
  "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
  "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
  "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
  "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
  "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
  "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
};
/* Hashes of the complete subtrees of the 8-leaf tree, by level. */
static const char *const ct_nodes[4][8] = {
  { "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
    "0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7",
    "07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7",
    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    "4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658",
    "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
    "46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1" },
  { "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
    "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
    "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0" },
  { "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4" },
  { "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328" },
};
/* Published consistency proofs over the same tree. */
static const struct {
  uint64_t m, n;
  const char *proof[4];
} ct_consistency[] = {
  { 2, 8, { "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4" } },
  { 6, 8, { "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
            "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
            "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7" } },
  { 2, 5, { "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
            "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b" } },
};

static void ct_tree(shk__mt_tree *t, shk__mt_compact *c, uint64_t n)
{
  for (uint64_t i = 0; i < n; i++) {
    unsigned char in[16];
    size_t len = strlen(ct_leaves[i]) / 2;
    unhex(ct_leaves[i], in);
    shk__hash leaf;
    shk__mt_leaf(in, len, leaf);
    assert_int_equal(shk__mt_tree_append(t, leaf), 0);
    shk__mt_compact_append(c, leaf);
  }
}

static void test_rfc6962_roots(void **state)
{
  for (uint64_t n = 0; n <= 8; n++) {
    shk__mt_tree t = { 0 };
    shk__mt_compact c = { 0 };
    ct_tree(&t, &c, n);
    shk__hash r1, r2;
    char h[65];
    shk__mt_tree_root(&t, n, r1);
    shk__mt_compact_root(&c, r2);
    hexs(r1, h);
    assert_string_equal(h, ct_roots[n]);
    hexs(r2, h);
    assert_string_equal(h, ct_roots[n]);
    shk__mt_tree_free(&t);
  }
}

/* The audit path of leaf i in the 8-leaf tree is its sibling at each
 * level, read from the published node table. */
static void test_rfc6962_inclusion(void **state)
{
  shk__mt_tree t = { 0 };
  shk__mt_compact c = { 0 };
  ct_tree(&t, &c, 8);
  shk__hash root, leaf;
  unhex(ct_roots[8], root);
  for (uint64_t i = 0; i < 8; i++) {
    shk__hash *p;
    size_t n;
    assert_int_equal(shk__mt_tree_inclusion(&t, i, 8, &p, &n), 0);
    assert_int_equal(n, 3);
    for (unsigned lv = 0; lv < 3; lv++) {
      char h[65];
      hexs(p[lv], h);
      assert_string_equal(h, ct_nodes[lv][(i >> lv) ^ 1]);
    }
    unhex(ct_nodes[0][i], leaf);
    assert_true(shk__mt_verify_inclusion(i, 8, leaf, p, n, root));
    free(p);
  }
  shk__mt_tree_free(&t);
}

static void test_rfc6962_consistency(void **state)
{
  shk__mt_tree t = { 0 };
  shk__mt_compact c = { 0 };
  ct_tree(&t, &c, 8);
  for (size_t k = 0; k < sizeof ct_consistency / sizeof ct_consistency[0]; k++) {
    shk__hash *p;
    size_t n;
    assert_int_equal(shk__mt_tree_consistency(&t, ct_consistency[k].m, ct_consistency[k].n, &p, &n), 0);
    size_t want = 0;
    while (want < 4 && ct_consistency[k].proof[want])
      want++;
    assert_int_equal(n, want);
    for (size_t i = 0; i < n; i++) {
      char h[65];
      hexs(p[i], h);
      assert_string_equal(h, ct_consistency[k].proof[i]);
    }
    shk__hash r1, r2;
    unhex(ct_roots[ct_consistency[k].m], r1);
    unhex(ct_roots[ct_consistency[k].n], r2);
    assert_true(shk__mt_verify_consistency(ct_consistency[k].m, ct_consistency[k].n, r1, r2, p, n));
    free(p);
  }
  shk__mt_tree_free(&t);
}

/* ---- a naive second implementation of RFC 6962 section 2.1, straight
 * from the definitions, recomputing every hash from the leaves ---- */
static void naive_mth(shk__hash *leaves, uint64_t n, shk__hash out)
{
  if (n == 0) {
    shk__sha256("", 0, out);
    return;
  }
  if (n == 1) {
    memcpy(out, leaves[0], 32);
    return;
  }
  uint64_t k = 1;
  while (k * 2 < n)
    k *= 2;
  shk__hash l, r;
  naive_mth(leaves, k, l);
  naive_mth(leaves + k, n - k, r);
  unsigned char b[65];
  b[0] = 1;
  memcpy(b + 1, l, 32);
  memcpy(b + 33, r, 32);
  shk__sha256(b, 65, out);
}

static void naive_path(shk__hash *leaves, uint64_t m, uint64_t n, shk__hash *out, size_t *len)
{
  if (n <= 1)
    return;
  uint64_t k = 1;
  while (k * 2 < n)
    k *= 2;
  if (m < k) {
    naive_path(leaves, m, k, out, len);
    naive_mth(leaves + k, n - k, out[(*len)++]);
  } else {
    naive_path(leaves + k, m - k, n - k, out, len);
    naive_mth(leaves, k, out[(*len)++]);
  }
}

static void naive_subproof(shk__hash *leaves, uint64_t m, uint64_t n, int b, shk__hash *out,
                           size_t *len)
{
  if (m == n) {
    if (!b)
      naive_mth(leaves, n, out[(*len)++]);
    return;
  }
  uint64_t k = 1;
  while (k * 2 < n)
    k *= 2;
  if (m <= k) {
    naive_subproof(leaves, m, k, b, out, len);
    naive_mth(leaves + k, n - k, out[(*len)++]);
  } else {
    naive_subproof(leaves + k, m - k, n - k, 0, out, len);
    naive_mth(leaves, k, out[(*len)++]);
  }
}

static void test_against_naive(void **state)
{
  enum { N = 70 };
  shk__hash leaves[N];
  shk__mt_tree t = { 0 };
  shk__mt_compact c = { 0 };
  for (uint64_t n = 0; n <= N; n++) {
    shk__hash want, got;
    naive_mth(leaves, n, want);
    shk__mt_tree_root(&t, n, got);
    assert_memory_equal(want, got, 32);
    shk__mt_compact_root(&c, got);
    assert_memory_equal(want, got, 32);
    /* Every audit path, and each one rejected for any other leaf, index,
     * size or a flipped bit. */
    for (uint64_t i = 0; i < n; i++) {
      shk__hash np[64], *p;
      size_t nn = 0, pn;
      naive_path(leaves, i, n, np, &nn);
      assert_int_equal(shk__mt_tree_inclusion(&t, i, n, &p, &pn), 0);
      assert_int_equal(pn, nn);
      if (pn)
        assert_memory_equal(p, np, pn * 32);
      assert_true(shk__mt_verify_inclusion(i, n, leaves[i], p, pn, want));
      if (n > 1) {
        assert_false(shk__mt_verify_inclusion(i, n, leaves[(i + 1) % n], p, pn, want));
        assert_false(shk__mt_verify_inclusion((i + 1) % n, n, leaves[i], p, pn, want));
        p[i % pn][i % 32] ^= 1;
        assert_false(shk__mt_verify_inclusion(i, n, leaves[i], p, pn, want));
      }
      free(p);
    }
    /* Every consistency proof from a smaller tree. */
    for (uint64_t m = 0; m <= n && n <= 40; m++) {
      shk__hash np[64], *p, r1;
      size_t nn = 0, pn;
      if (m > 0 && m < n)
        naive_subproof(leaves, m, n, 1, np, &nn);
      assert_int_equal(shk__mt_tree_consistency(&t, m, n, &p, &pn), 0);
      assert_int_equal(pn, nn);
      if (pn)
        assert_memory_equal(p, np, pn * 32);
      naive_mth(leaves, m, r1);
      assert_true(shk__mt_verify_consistency(m, n, r1, want, p, pn));
      if (pn) {
        shk__hash bad;
        memcpy(bad, r1, 32);
        bad[0] ^= 1;
        assert_false(shk__mt_verify_consistency(m, n, bad, want, p, pn));
        p[pn - 1][5] ^= 0x80;
        assert_false(shk__mt_verify_consistency(m, n, r1, want, p, pn));
      }
      free(p);
    }
    if (n == N)
      break;
    unsigned char in[2] = { (unsigned char)n, (unsigned char)(n * 7) };
    shk__mt_leaf(in, 2, leaves[n]);
    assert_int_equal(shk__mt_tree_append(&t, leaves[n]), 0);
    shk__mt_compact_append(&c, leaves[n]);
  }
  shk__mt_tree_free(&t);
}

/* ---- signed notes: the example key and note of the Go reference
 * implementation's documentation (golang.org/x/mod/sumdb/note), and the
 * C2SP signed-note specification's verifier-key example ---- */
static const char go_skey[] =
  "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
static const char go_vkey[] = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
static const char go_text[] = "If you think cryptography is the answer to your problem,\n"
                              "then you don't know what your problem is.\n";
static const char go_note[] =
  "If you think cryptography is the answer to your problem,\n"
  "then you don't know what your problem is.\n"
  "\n"
  "\xe2\x80\x94 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";
static const char spec_vkey[] = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k";
static const char spec_note[] =
  "This is an example message.\n\n"
  "\xe2\x80\x94 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n";

static void test_note_vectors(void **state)
{
  shk__note_key sk, vk;
  shk_error err;
  assert_int_equal(shk__note_key_parse(go_skey, strlen(go_skey), &sk, &err), 0);
  assert_int_equal(sk.id, 0xc74f20a3);
  assert_string_equal(sk.name, "PeterNeumann");
  char *v;
  assert_int_equal(shk__note_key_verifier(&sk, &v), 0);
  assert_string_equal(v, go_vkey);
  free(v);
  /* Ed25519 is deterministic: the same key and text give the same note. */
  shk__abuf out = { 0 };
  assert_int_equal(shk__note_sign(&sk, go_text, strlen(go_text), &out, &err), 0);
  assert_string_equal(out.p, go_note);
  shk__abuf_free(&out);

  size_t tl;
  assert_int_equal(shk__note_key_parse(go_vkey, strlen(go_vkey), &vk, &err), 0);
  assert_int_equal(shk__note_open(go_note, strlen(go_note), &vk, &tl, &err), 0);
  assert_int_equal(tl, strlen(go_text));
  assert_int_equal(shk__note_key_parse(spec_vkey, strlen(spec_vkey), &vk, &err), 0);
  assert_int_equal(vk.id, 0x530d903a);
  assert_int_equal(shk__note_open(spec_note, strlen(spec_note), &vk, &tl, &err), 0);

  /* A changed text, a key not among the signers, a changed key ID. */
  char bad[sizeof spec_note];
  memcpy(bad, spec_note, sizeof spec_note);
  bad[5] = 'I';
  assert_int_equal(shk__note_open(bad, strlen(bad), &vk, &tl, &err), -EACCES);
  assert_int_equal(shk__note_key_parse(go_vkey, strlen(go_vkey), &vk, &err), 0);
  assert_int_equal(shk__note_open(spec_note, strlen(spec_note), &vk, &tl, &err), -EACCES);
  assert_int_equal(shk__note_key_parse("PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
                                       66, &vk, &err), -EINVAL);
}

/* The C2SP tlog-checkpoint specification's example checkpoint (its key is
 * not published: only its form is checked), and a signed round trip. */
static void test_checkpoint_format(void **state)
{
  static const char ex[] =
    "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n"
    "\xe2\x80\x94 example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n";
  shk__checkpoint cp;
  shk_error err;
  assert_int_equal(shk__checkpoint_open(ex, strlen(ex), NULL, &cp, &err), 0);
  assert_string_equal(cp.origin, "example.com/behind-the-sofa");
  assert_int_equal(cp.size, 20852163);
  char b[48];
  shk__b64_encode(cp.root, 32, b);
  assert_string_equal(b, "CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=");

  shk__note_key k;
  assert_int_equal(shk__note_key_generate("example.test/log", &k, &err), 0);
  shk__hash root;
  unhex(ct_roots[8], root);
  shk__abuf text = { 0 }, note = { 0 };
  assert_int_equal(shk__checkpoint_text("example.test/log", 8, root, &text), 0);
  assert_string_equal(text.p, "example.test/log\n8\nXcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=\n");
  assert_int_equal(shk__note_sign(&k, text.p, text.len, &note, &err), 0);
  assert_int_equal(shk__checkpoint_open(note.p, note.len, &k, &cp, &err), 0);
  assert_int_equal(cp.size, 8);
  assert_memory_equal(cp.root, root, 32);

  /* Malformed bodies are refused with a sentence. */
  static const char *const bad[] = {
    "\n8\nXcnaeacGWamtVZy3Ad7ZoqudgjqqL0lgz+Nw7/RgQyg=\n\n\xe2\x80\x94 a AAAAAAAA\n",
    "o\n08\nXcnaeacGWamtVZy3Ad7ZoqudgjqqL0lgz+Nw7/RgQyg=\n\n\xe2\x80\x94 a AAAAAAAA\n",
    "o\n8\nXcnaeacGWamtVZy3Ad7ZoqudgjqqL0lgz+Nw7/RgQy=\n\n\xe2\x80\x94 a AAAAAAAA\n",
    "o\n8\nXcnaeacGWamtVZy3Ad7ZoqudgjqqL0lgz+Nw7/RgQyg=\n\n- a AAAAAAAA\n",
    "o\n8\nXcnaeacGWamtVZy3Ad7ZoqudgjqqL0lgz+Nw7/RgQyg=\n\n\xe2\x80\x94 a AAAAAAAA",
    "o\n8\nXcnaeacGWamtVZy3Ad7ZoqudgjqqL0lgz+Nw7/RgQyg=\n\n",
    "o\r\n8\nXcnaeacGWamtVZy3Ad7ZoqudgjqqL0lgz+Nw7/RgQyg=\n\n\xe2\x80\x94 a AAAAAAAA\n",
    "o\n99999999999999999999999\nXcnaeacGWamtVZy3Ad7ZoqudgjqqL0lgz+Nw7/RgQyg=\n\n\xe2\x80\x94 a AAAAAAAA\n",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err.message[0] = '\0';
    assert_int_equal(shk__checkpoint_open(bad[i], strlen(bad[i]), NULL, &cp, &err), -EINVAL);
    assert_true(err.message[0] != '\0');
  }
  shk__abuf_free(&text);
  shk__abuf_free(&note);
}

static void test_base64(void **state)
{
  unsigned char out[8];
  assert_int_equal(shk__b64_decode("Zm9vYg==", 8, out, sizeof out), 4);
  assert_memory_equal(out, "foob", 4);
  assert_int_equal(shk__b64_decode("Zm9vYh==", 8, out, sizeof out), -EINVAL); /* stray bits */
  assert_int_equal(shk__b64_decode("Zm9vYg=", 7, out, sizeof out), -EINVAL);
  assert_int_equal(shk__b64_decode("Zm9v Yg=", 8, out, sizeof out), -EINVAL);
  assert_int_equal(shk__b64_decode("Zg==Zg==", 8, out, sizeof out), -EINVAL);
  char b[16];
  shk__b64_encode((const unsigned char *)"fooba", 5, b);
  assert_string_equal(b, "Zm9vYmE=");
}

/* ---- canonical serialization ---- */
static char *serialize(const shk_audit_event *e, uint64_t seq)
{
  shk__hash prev;
  memset(prev, 0xab, 32);
  shk__abuf out = { 0 };
  assert_int_equal(e->error, 0);
  assert_int_equal(shk__audit_serialize(e->buf, e->len, 1700000000123456789LL, seq, prev, &out), 0);
  return out.p;
}

static void test_canonical(void **state)
{
  shk_audit_event e;
  shk_audit_event_init(&e, "grant");
  shk_audit_str(&e, SHK_AUDIT_TOOL, "pip");
  shk_audit_str(&e, SHK_AUDIT_SESSION, "s-1");
  shk_audit_int(&e, SHK_AUDIT_PORT, -42);
  shk_audit_int(&e, SHK_AUDIT_HUMAN_UID, 0);
  static const char *const l[] = { "b", "a", NULL };
  shk_audit_strv(&e, SHK_AUDIT_ENFORCED, l);
  shk_audit_hashed(&e, "cmd", "abc", 3);
  char *s = serialize(&e, 7);
  assert_string_equal(s,
    "{\"event.name\":\"grant\",\"gen_ai.conversation.id\":\"s-1\","
    "\"gen_ai.operation.name\":\"execute_tool\",\"gen_ai.tool.name\":\"pip\","
    "\"prev\":\"abababababababababababababababababababababababababababababababab\",\"seq\":7,"
    "\"server.port\":-42,\"shinken.human.uid\":0,"
    "\"shinken.param.cmd.sha256\":\"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\","
    "\"shinken.sandbox.enforced\":[\"b\",\"a\"],\"time\":\"2023-11-14T22:13:20.123456789Z\"}");
  uint64_t seq;
  shk__hash prev;
  shk_error err;
  assert_int_equal(shk__audit_entry_check(s, strlen(s), &seq, prev, &err), 0);
  assert_int_equal(seq, 7);
  free(s);

  /* RFC 8785's string escapes: the two-character forms where JSON has
   * them, \u00xx in lower case for the other controls, everything else
   * (DEL, non-ASCII) as it is. */
  char all[48];
  for (int i = 1; i < 32; i++)
    all[i - 1] = (char)i;
  strcpy(all + 31, "\"\\\x7f\xc3\xa9\xf0\x9f\x98\x80");
  shk_audit_event_init(&e, "x");
  shk_audit_str(&e, SHK_AUDIT_REASON, all);
  s = serialize(&e, 0);
  assert_non_null(strstr(s,
    "\"shinken.reason\":\"\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r"
    "\\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019\\u001a"
    "\\u001b\\u001c\\u001d\\u001e\\u001f\\\"\\\\\x7f\xc3\xa9\xf0\x9f\x98\x80\""));
  assert_int_equal(shk__audit_entry_check(s, strlen(s), &seq, prev, &err), 0);
  free(s);
}

static void test_entry_check_refuses(void **state)
{
  static const char P[] = "\"prev\":\"0000000000000000000000000000000000000000000000000000000000000000\"";
  static const struct {
    const char *head, *tail;
  } bad[] = {
    { "{\"event.name\":\"a\",", ",\"seq\":1,\"time\":\"t\"} " },       /* trailing space */
    { "{\"event.name\":\"a\", ", ",\"seq\":1,\"time\":\"t\"}" },       /* whitespace */
    { "{\"event.name\":\"a\",", ",\"time\":\"t\",\"seq\":1}" },        /* unsorted */
    { "{\"event.name\":\"a\",", ",\"seq\":1,\"seq\":1,\"time\":\"t\"}" }, /* repeated */
    { "{\"event.name\":\"a\\/\",", ",\"seq\":1,\"time\":\"t\"}" },     /* \/ */
    { "{\"event.name\":\"\\u0041\",", ",\"seq\":1,\"time\":\"t\"}" },  /* needless \u */
    { "{\"event.name\":\"\\u001F\",", ",\"seq\":1,\"time\":\"t\"}" },  /* upper-case hex */
    { "{\"event.name\":\"\\u000a\",", ",\"seq\":1,\"time\":\"t\"}" },  /* \n spelled \u */
    { "{\"event.name\":\"\x01\",", ",\"seq\":1,\"time\":\"t\"}" },     /* raw control */
    { "{\"event.name\":\"\xc3\",", ",\"seq\":1,\"time\":\"t\"}" },     /* not UTF-8 */
    { "{\"event.name\":\"\xed\xa0\x80\",", ",\"seq\":1,\"time\":\"t\"}" }, /* surrogate */
    { "{\"event.name\":\"a\",", ",\"seq\":01,\"time\":\"t\"}" },       /* leading zero */
    { "{\"event.name\":\"a\",", ",\"seq\":1.0,\"time\":\"t\"}" },      /* not an integer */
    { "{\"event.name\":\"a\",", ",\"seq\":-0,\"time\":\"t\"}" },
    { "{\"event.name\":\"a\",", ",\"seq\":9007199254740992,\"time\":\"t\"}" },
    { "{\"event.name\":\"a\",", ",\"time\":\"t\"}" },                  /* no seq */
    { "{\"event.name\":\"a\",", ",\"seq\":1,\"time\":\"t\"}x" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s%s%s", bad[i].head, P, bad[i].tail);
    uint64_t seq;
    shk__hash prev;
    shk_error err = { 0 };
    if (shk__audit_entry_check(buf, strlen(buf), &seq, prev, &err) != -EINVAL)
      fail_msg("accepted case %zu: %s", i, buf);
    assert_true(err.message[0] != '\0');
  }
  char ok[512];
  snprintf(ok, sizeof ok, "{\"event.name\":\"a\",%s,\"seq\":1,\"time\":\"t\"}", P);
  uint64_t seq;
  shk__hash prev;
  assert_int_equal(shk__audit_entry_check(ok, strlen(ok), &seq, prev, NULL), 0);
}

/* ---- the builder refuses what cannot be logged, naming the field ---- */
static void test_builder_refuses(void **state)
{
  shk_audit_event e;
  shk_error err;
  shk_audit *none = NULL;
  shk_audit_event_init(&e, "Grant");
  assert_int_equal(shk_audit_emit(none, &e, &err), -EINVAL);
  assert_non_null(strstr(err.message, "name"));

  shk_audit_event_init(&e, "grant");
  shk_audit_str(&e, SHK_AUDIT_SCOPE, "a");
  shk_audit_str(&e, SHK_AUDIT_SCOPE, "b");
  assert_int_equal(shk_audit_emit(none, &e, &err), -EINVAL);
  assert_non_null(strstr(err.message, "shinken.scope is set twice"));

  shk_audit_event_init(&e, "grant");
  shk_audit_int(&e, SHK_AUDIT_SCOPE, 1);
  assert_int_equal(shk_audit_emit(none, &e, &err), -EINVAL);
  assert_non_null(strstr(err.message, "not an integer field"));

  shk_audit_event_init(&e, "grant");
  shk_audit_str(&e, SHK_AUDIT_REASON, "\xff");
  assert_int_equal(shk_audit_emit(none, &e, &err), -EINVAL);
  assert_non_null(strstr(err.message, "shinken.reason is not UTF-8"));

  shk_audit_event_init(&e, "grant");
  shk_audit_int(&e, SHK_AUDIT_PORT, INT64_MAX);
  assert_int_equal(shk_audit_emit(none, &e, &err), -EINVAL);

  char big[5000];
  memset(big, 'a', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  shk_audit_event_init(&e, "grant");
  shk_audit_str(&e, SHK_AUDIT_REASON, big);
  assert_int_equal(shk_audit_emit(none, &e, &err), -EINVAL);
  assert_non_null(strstr(err.message, "4096"));

  shk_audit_event_init(&e, "grant");
  shk_audit_hashed(&e, "x", "1", 1);
  shk_audit_hashed(&e, "x", "2", 1);
  assert_int_equal(shk_audit_emit(none, &e, &err), -EINVAL);
  shk_audit_event_init(&e, "grant");
  shk_audit_hashed(&e, "X-Header", "1", 1);
  assert_int_equal(shk_audit_emit(none, &e, &err), -EINVAL);
}

/* ---- the writer: a full queue refuses, counts, and records the count;
 * no accepted event is lost; the log reopens where it was ---- */
static int count_rows(void *data, uint64_t seq, const char *entry, size_t len,
                      const unsigned char leaf[32])
{
  uint64_t *n = data;
  if (strstr(entry, "\"event.name\":\"audit-overflow\"") && strstr(entry, "\"shinken.count\":6,"))
    n[1]++;
  n[0]++;
  return 0;
}

static void test_writer_overflow(void **state)
{
  char dir[] = "/tmp/shk-audit-unit-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char db[256];
  snprintf(db, sizeof db, "%s/log/audit.db", dir);
  shk_audit_opts o = { .db_path = db, .queue_bytes = 65536, .no_fsync = true };
  shk_audit *a;
  shk_error err;
  assert_int_equal(shk_audit_open(&o, &a, &err), 0);
  shk__audit_pause(a, true);
  shk_audit_event e;
  shk_audit_event_init(&e, "grant");
  char fill[2000];
  memset(fill, 'x', sizeof fill - 1);
  fill[sizeof fill - 1] = '\0';
  shk_audit_str(&e, SHK_AUDIT_REASON, fill);
  uint64_t accepted = 0;
  int r;
  while ((r = shk_audit_emit(a, &e, &err)) == 0)
    accepted++;
  assert_int_equal(r, -EBUSY);
  for (int i = 0; i < 5; i++)
    assert_int_equal(shk_audit_emit(a, &e, &err), -EBUSY);
  assert_int_equal(shk_audit_refused(a), 6);
  assert_in_range(accepted, 20, 40);
  shk__audit_pause(a, false);
  assert_int_equal(shk_audit_flush(a, true, &err), 0);
  assert_int_equal(shk_audit_close(a, &err), 0);

  shk_audit_reader *rd;
  uint64_t n[2] = { 0, 0 };
  assert_int_equal(shk_audit_reader_open(db, &rd, &err), 0);
  assert_int_equal(shk_audit_reader_scan(rd, 0, count_rows, n, &err), 0);
  shk_audit_reader_close(rd);
  /* start, the accepted ones, the overflow record, stop */
  assert_int_equal(n[0], accepted + 3);
  assert_int_equal(n[1], 1);

  shk_audit_verify_opts vo = { .db_path = db };
  shk_audit_report rep;
  assert_int_equal(shk_audit_verify(&vo, &rep, &err), 0);
  assert_false(rep.tampered);
  assert_int_equal(rep.checked_size, accepted + 3);

  /* The same log continues; while it is open, no second writer may
   * append to it. */
  assert_int_equal(shk_audit_open(&o, &a, &err), 0);
  shk_audit *second = NULL;
  assert_int_equal(shk_audit_open(&o, &second, &err), -EBUSY);
  assert_null(second);
  assert_non_null(strstr(err.message, "another process is writing the audit log"));
  assert_int_equal(shk_audit_close(a, &err), 0);
  assert_int_equal(shk_audit_verify(&vo, &rep, &err), 0);
  assert_false(rep.tampered);
  assert_int_equal(rep.events, accepted + 5);

  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

static void test_time(void **state)
{
  char t[31];
  shk__audit_time(1700000000123456789LL, t);
  assert_string_equal(t, "2023-11-14T22:13:20.123456789Z");
  int64_t ns;
  assert_int_equal(shk_audit_parse_time(t, &ns), 0);
  assert_int_equal(ns, 1700000000123456789LL);
  assert_int_equal(shk_audit_parse_time("2023-11-15T00:13:20.5+02:00", &ns), 0);
  assert_int_equal(ns, 1700000000500000000LL);
  assert_int_equal(shk_audit_parse_time("2023-11-14 22:13:20Z", &ns), 0);
  assert_int_equal(shk_audit_parse_time("2023-11-14T22:13:20", &ns), -EINVAL);
  assert_int_equal(shk_audit_parse_time("yesterday", &ns), -EINVAL);
}

int main(void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_rfc6962_roots),
    cmocka_unit_test(test_rfc6962_inclusion),
    cmocka_unit_test(test_rfc6962_consistency),
    cmocka_unit_test(test_against_naive),
    cmocka_unit_test(test_note_vectors),
    cmocka_unit_test(test_checkpoint_format),
    cmocka_unit_test(test_base64),
    cmocka_unit_test(test_canonical),
    cmocka_unit_test(test_entry_check_refuses),
    cmocka_unit_test(test_builder_refuses),
    cmocka_unit_test(test_writer_overflow),
    cmocka_unit_test(test_time),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
