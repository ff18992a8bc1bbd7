set terminal pngcairo size 900,600 noenhanced
set logscale xy
set grid
set key top left
set xlabel 'size (full buffer)'
set xtics ('8 B' 8, '64 B' 64, '1 KiB' 1024, '16 KiB' 16384, '256 KiB' 262144, '4 MiB' 4194304, '64 MiB' 67108864)
set output 'over4_reduce_busbw.png'
set title 'reduce, 4 ranks on 2 cores (oversubscribed), shared memory'
set ylabel 'bus bandwidth (GB/s)'
plot 'over4_reduce_cohort.dat' using 1:3 with linespoints title 'cohort', 'over4_reduce_ompi.dat' using 1:3 with linespoints title 'Open MPI', 'over4_reduce_mpich.dat' using 1:3 with linespoints title 'MPICH'
set output 'over4_reduce_lat.png'
set title 'reduce, 4 ranks on 2 cores (oversubscribed), shared memory'
set ylabel 'time per op (us)'
plot 'over4_reduce_cohort.dat' using 1:2 with linespoints title 'cohort', 'over4_reduce_ompi.dat' using 1:2 with linespoints title 'Open MPI', 'over4_reduce_mpich.dat' using 1:2 with linespoints title 'MPICH'
set output 'over4osu_reduce_busbw.png'
set title 'reduce, 4 ranks on 2 cores, shared memory, OSU style'
set ylabel 'bus bandwidth (GB/s)'
plot 'over4osu_reduce_cohort.dat' using 1:3 with linespoints title 'cohort', 'over4osu_reduce_ompi.dat' using 1:3 with linespoints title 'Open MPI'
set output 'over4osu_reduce_lat.png'
set title 'reduce, 4 ranks on 2 cores, shared memory, OSU style'
set ylabel 'time per op (us)'
plot 'over4osu_reduce_cohort.dat' using 1:2 with linespoints title 'cohort', 'over4osu_reduce_ompi.dat' using 1:2 with linespoints title 'Open MPI'
