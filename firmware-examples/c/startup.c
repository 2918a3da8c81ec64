/*
 * Bare-metal start for the Cortex-M4F (QEMU mps2-an386): the vector table, the reset
 * handler (copy .data, clear .bss, turn the FPU on, call main) and the platform
 * functions through ARM semihosting.
 */
#include <stdint.h>

#include "platform.h"

extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;
extern int main(void);

/* Semihosting operations and the exit reasons QEMU maps to exit statuses 0 and 1. */
#define SYS_OPEN 0x01
#define SYS_WRITE 0x05
#define SYS_EXIT 0x18
#define ADP_STOPPED_APPLICATION_EXIT 0x20026
#define ADP_STOPPED_RUN_TIME_ERROR 0x20023

static uint32_t semihost(uint32_t op, const void *arg) {
    register uint32_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

/* The host's standard output, ":tt" opened for writing (as cortex-m-semihosting's
 * hprintln, so that C and Rust firmware print to the same stream). */
static uint32_t stdout_handle(void) {
    static uint32_t handle = UINT32_MAX;
    if (handle == UINT32_MAX) {
        const uint32_t args[3] = {(uint32_t)(uintptr_t)":tt", 4, 3};
        handle = semihost(SYS_OPEN, args);
    }
    return handle;
}

void platform_write(const char *s) {
    uint32_t len = 0;
    while (s[len] != '\0') {
        len++;
    }
    const uint32_t args[3] = {stdout_handle(), (uint32_t)(uintptr_t)s, len};
    semihost(SYS_WRITE, args);
}

void platform_exit(bool success) {
    /* On 32-bit ARM the reason itself is the argument. */
    semihost(SYS_EXIT, (const void *)(uintptr_t)(success ? ADP_STOPPED_APPLICATION_EXIT
                                                         : ADP_STOPPED_RUN_TIME_ERROR));
    for (;;) {
        __asm__ volatile("wfi");
    }
}

static void fault_handler(void) {
    platform_write("fault\n");
    platform_exit(false);
}

void reset_handler(void) {
    uint32_t *src = &_sidata;
    for (uint32_t *dst = &_sdata; dst < &_edata;) {
        *dst++ = *src++;
    }
    for (uint32_t *dst = &_sbss; dst < &_ebss;) {
        *dst++ = 0;
    }
    /* Full access to CP10 and CP11 (the FPU) before the first float instruction. */
    volatile uint32_t *cpacr = (volatile uint32_t *)0xE000ED88u;
    *cpacr |= 0xFu << 20;
    __asm__ volatile("dsb\n\tisb" ::: "memory");
    platform_exit(main() == 0);
}

/* The initial stack pointer, then the reset and fault handlers. */
__attribute__((section(".vectors"), used)) static const void *const vectors[16] = {
    &_estack,      reset_handler, fault_handler, fault_handler,
    fault_handler, fault_handler, fault_handler, 0,
    0,             0,             0,             fault_handler,
    fault_handler, 0,             fault_handler, fault_handler,
};
