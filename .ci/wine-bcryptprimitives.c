/* bcryptprimitives.dll for Wine 8.0 (Debian 12's), which lacks it: Rust's standard library
 * (since 1.78) takes its random bytes from ProcessPrng there, and a program that imports a
 * DLL Wine cannot find does not start. Windows 10 and later have the real one; .ci/wine puts
 * this one in the Wine prefix only. ProcessPrng over advapi32's RtlGenRandom
 * (SystemFunction036), which Wine has. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length) {
  while (length > 0) {
    ULONG n = length > 0x40000000 ? 0x40000000 : (ULONG)length;
    if (!SystemFunction036(data, n)) return FALSE;
    data += n;
    length -= n;
  }
  return TRUE;
}
