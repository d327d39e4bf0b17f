#include "utf8.h"

size_t nl_utf8_seq(const unsigned char *s, size_t n, size_t *bad_len)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xBF;
	size_t need;
	*bad_len = 1;
	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		need = 1;
	else if (c >= 0xE0 && c <= 0xEF)
		need = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
	else if (c >= 0xF0 && c <= 0xF4)
		need = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
	else
		return 0;
	for (size_t i = 1; i <= need; i++) {
		unsigned char min = i == 1 ? lo : 0x80, max = i == 1 ? hi : 0xBF;
		if (i >= n || s[i] < min || s[i] > max) {
			*bad_len = i;
			return 0;
		}
	}
	return need + 1;
}
