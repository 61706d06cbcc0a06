/*
 * A stand-in bcryptprimitives.dll for running Windows builds of pp-offline
 * and its test binaries under wine versions that lack that DLL (Debian's
 * wine 8.0). The Go runtime (1.22 and later) imports ProcessPrng from it
 * and will not start without it. Here ProcessPrng fills the buffer from
 * advapi32's RtlGenRandom (exported as SystemFunction036), which wine has.
 *
 * Built by scripts/test-windows.sh with mingw-w64 into a temporary folder;
 * never committed as a binary. Not for use outside wine.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
	while (len > 0) {
		ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
		if (!SystemFunction036(data, n))
			return FALSE;
		data += n;
		len -= n;
	}
	return TRUE;
}

BOOL WINAPI DllMain(HINSTANCE inst, DWORD reason, LPVOID reserved)
{
	(void)inst;
	(void)reason;
	(void)reserved;
	return TRUE;
}
